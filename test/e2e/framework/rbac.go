package framework

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// WaitAuthorized waits until the API server's authorizer lets user (in groups) do verb on
// the resource of group, cluster-wide. A binding a test has just created reaches the RBAC
// authorizer through its informers, a moment after the create returns; a test that acts
// at once as the user can be refused for that moment.
func WaitAuthorized(t testing.TB, user string, groups []string, verb, group, resource string) {
	t.Helper()
	WaitAuthorizedIn(t, "", user, groups, verb, group, resource)
}

// WaitAuthorizedIn is WaitAuthorized in one namespace ("" is cluster-wide), for a
// RoleBinding.
func WaitAuthorizedIn(t testing.TB, namespace, user string, groups []string, verb, group, resource string) {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: group, Resource: resource}}}
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true,
		func(ctx context.Context) (bool, error) {
			got, err := C.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			if err != nil {
				return false, err
			}
			return got.Status.Allowed, nil
		}), "%s (groups %v) is never allowed to %s %s.%s in namespace %q", user, groups, verb, resource, group, namespace)
}

// WaitGranted waits until the authorizer applies a role of rules just bound to user in
// namespace ("" is cluster-wide). The role and its binding arrive through two informers,
// so the first rule's first verb on its first resource proves both have arrived.
func WaitGranted(t testing.TB, namespace, user string, rules []rbacv1.PolicyRule) {
	t.Helper()
	require.NotEmpty(t, rules, "no rule to wait for")
	r := rules[0]
	WaitAuthorizedIn(t, namespace, user, nil, r.Verbs[0], r.APIGroups[0], r.Resources[0])
}
