package upgrade

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
)

// upgradeScope names the rollout of status, resume and abort: by name, or the newest
// rollout of --pool or --node.
type upgradeScope struct {
	Name, Pool, Node string
}

func (s *upgradeScope) addFlags(cmd *cobra.Command, f kit.Factory) {
	cmd.Flags().StringVar(&s.Pool, "pool", "", "The newest rollout of this pool")
	cmd.Flags().StringVar(&s.Node, "node", "", "The newest rollout of this node")
	_ = cmd.RegisterFlagCompletionFunc("pool", kit.CompletePoolNames(f))
}

func (s *upgradeScope) complete(cmd *cobra.Command, args []string, required bool) error {
	if len(args) > 1 {
		return fmt.Errorf("%s takes at most one rollout name, got %q", cmd.CommandPath(), strings.Join(args, " "))
	}
	if len(args) == 1 {
		s.Name = args[0]
	}
	n := 0
	for _, v := range []string{s.Name, s.Pool, s.Node} {
		if v != "" {
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("name the rollout one way: NAME, --pool or --node")
	}
	if required && n == 0 {
		return fmt.Errorf("name the rollout: NAME (kubectl get driverrollouts), --pool POOL or --node NODE")
	}
	return nil
}

func (s *upgradeScope) String() string {
	switch {
	case s.Name != "":
		return "driverrollout " + s.Name
	case s.Pool != "":
		return "pool " + s.Pool
	case s.Node != "":
		return "node " + s.Node
	}
	return "the cluster"
}

// rollouts are the rollouts in scope, oldest first: the named one, or those of the pool
// or node, or all.
func (s *upgradeScope) rollouts(ctx context.Context, c client.Client) ([]v1alpha1.DriverRollout, error) {
	if s.Name != "" {
		var ro v1alpha1.DriverRollout
		if err := c.Get(ctx, client.ObjectKey{Name: s.Name}, &ro); err != nil {
			return nil, noCRD(err)
		}
		return []v1alpha1.DriverRollout{ro}, nil
	}
	var list v1alpha1.DriverRolloutList
	if err := c.List(ctx, &list); err != nil {
		return nil, noCRD(err)
	}
	var out []v1alpha1.DriverRollout
	for _, ro := range list.Items {
		inNode := slices.Contains(ro.Spec.Nodes, s.Node) || slices.ContainsFunc(ro.Status.Nodes, func(n v1alpha1.DriverRolloutNode) bool { return n.Name == s.Node })
		switch {
		case s.Pool != "" && ro.Spec.Pool != s.Pool:
		case s.Node != "" && !inNode:
		default:
			out = append(out, ro)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreationTimestamp.Equal(&out[j].CreationTimestamp) {
			return out[i].CreationTimestamp.Before(&out[j].CreationTimestamp)
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// newest is the scope's newest rollout, or nil.
func (s *upgradeScope) newest(ctx context.Context, c client.Client) (*v1alpha1.DriverRollout, error) {
	list, err := s.rollouts(ctx, c)
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return &list[len(list)-1], nil
}

// checkNotInAnother is rule U4 before a rollout is created: one node, one unfinished
// rollout. The controller checks it again when the rollout starts.
func checkNotInAnother(ctx context.Context, c client.Client, need []string) error {
	var list v1alpha1.DriverRolloutList
	if err := c.List(ctx, &list); err != nil {
		return noCRD(err)
	}
	return policy.CheckNotInAnotherRollout(need, upgrade.Holds(list.Items, ""))
}

// changeOptions is what resume and abort share: the rollout, the kit's mutation flags
// and the following of the changed rollout.
type changeOptions struct {
	Scope upgradeScope
	kit.Mutation
	Follow   FollowFlags
	clients  *kit.Clients
	rollouts client.Client
	clock    clock.PassiveClock
	genericiooptions.IOStreams
}

func (s *changeOptions) addFlags(cmd *cobra.Command, f kit.Factory) {
	s.Scope.addFlags(cmd, f)
	s.Mutation.AddFlags(cmd, false)
	s.Follow.addFlags(cmd)
}

// Complete reads the rollout's name (it is required), and builds the clients.
func (s *changeOptions) Complete(f kit.Factory, cmd *cobra.Command, args []string) (err error) {
	if err := s.Scope.complete(cmd, args, true); err != nil {
		return err
	}
	if s.clients, err = s.CompleteClients(f, cmd); err != nil {
		return err
	}
	s.clock = f.Clock()
	s.Follow.HandOver.Complete(cmd, s.clients.Kube, s.clock)
	s.rollouts, err = rolloutClientFor(f)
	return err
}

// patch changes the rollout's spec with edit (refused if another writer changed it
// in between), or under --dry-run=server has the API server check the change.
func (s *changeOptions) patch(ctx context.Context, ro *v1alpha1.DriverRollout, edit func(*v1alpha1.DriverRollout)) error {
	orig := ro.DeepCopy()
	edit(ro)
	var opts []client.PatchOption
	switch s.DryRun {
	case cmdutil.DryRunClient:
		return nil
	case cmdutil.DryRunServer:
		opts = append(opts, client.DryRunAll)
	}
	return s.rollouts.Patch(ctx, ro, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), opts...)
}

func (s *changeOptions) follow(ctx context.Context, name string) error {
	if s.DryRun != cmdutil.DryRunNone {
		return nil
	}
	f := &follower{FollowFlags: s.Follow, c: s.rollouts, kube: s.clients.Kube, recorder: s.Recorder, clock: s.clock,
		out: s.SayTo(s.IOStreams), errOut: s.ErrOut}
	return f.follow(ctx, name)
}
