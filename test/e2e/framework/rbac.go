package framework

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// WaitAuthorized waits until the API server's authorizer lets user (in groups) do verb on
// the resource of group, cluster-wide. A binding a test has just created reaches the RBAC
// authorizer through its informers, a moment after the create returns; a test that acts
// at once as the user can be refused for that moment.
func WaitAuthorized(t testing.TB, user string, groups []string, verb, group, resource string) {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource}}}
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true,
		func(ctx context.Context) (bool, error) {
			got, err := C.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			if err != nil {
				return false, err
			}
			return got.Status.Allowed, nil
		}), "%s (groups %v) is never allowed to %s %s.%s", user, groups, verb, resource, group)
}
