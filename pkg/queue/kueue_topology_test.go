package queue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

func topologyPool(levels ...string) *v1alpha1.Pool {
	p := queuePool()
	p.Spec.Topology = &v1alpha1.TopologySpec{Levels: levels}
	return p
}

func levelsOf(u *unstructured.Unstructured) []string {
	var out []string
	for _, l := range field(u, "spec", "levels").([]any) {
		out = append(out, l.(map[string]any)["nodeLabel"].(string))
	}
	return out
}

func TestKueueSyncWritesTheTopology(t *testing.T) {
	ctx := context.Background()
	c := kueueClient(true)
	k := Kueue{Client: c}
	pool := topologyPool("huawei.com/topotree.superpodid")
	_, err := k.Sync(ctx, pool, capacity24, []string{"team-a"}, false)
	require.NoError(t, err)

	top := get(t, c, KueueTopology, "", TopologyName(pool))
	require.NotNil(t, top, "a pool with spec.topology and spec.queue has a Kueue Topology")
	assert.Equal(t, []string{"huawei.com/topotree.superpodid", "kubernetes.io/hostname"}, levelsOf(top), "the pool's levels, then the hostname")
	assert.True(t, OwnedBy(top, pool))

	flavor := get(t, c, KueueFlavor, "", FlavorName(pool))
	require.NotNil(t, flavor)
	assert.Equal(t, TopologyName(pool), field(flavor, "spec", "topologyName"))
	assert.Nil(t, get(t, c, KueueFlavor, "", pool.Name), "a TAS flavor is named by what Kueue freezes in it")
	cq := get(t, c, KueueClusterQueue, "", pool.Name)
	flavors := field(cq, "spec", "resourceGroups").([]any)[0].(map[string]any)["flavors"].([]any)
	assert.Equal(t, FlavorName(pool), flavors[0].(map[string]any)["name"], "the ClusterQueue gives its quota to the TAS flavor")

	// Kueue freezes a Topology's levels and a flavor's topologyName: new levels are a
	// new Topology and flavor, and the old ones go once the ClusterQueue left them.
	oldTop, oldFlavor := TopologyName(pool), FlavorName(pool)
	moved := topologyPool("huawei.com/topotree.superpodid", "huawei.com/topotree.rackid")
	_, err = k.Sync(ctx, moved, capacity24, []string{"team-a"}, false)
	require.NoError(t, err)
	assert.NotEqual(t, oldTop, TopologyName(moved))
	assert.NotEqual(t, oldFlavor, FlavorName(moved))
	assert.Nil(t, get(t, c, KueueTopology, "", oldTop), "the old Topology is deleted")
	assert.Nil(t, get(t, c, KueueFlavor, "", oldFlavor), "the old flavor is deleted")
	require.NotNil(t, get(t, c, KueueTopology, "", TopologyName(moved)))
	cq = get(t, c, KueueClusterQueue, "", pool.Name)
	flavors = field(cq, "spec", "resourceGroups").([]any)[0].(map[string]any)["flavors"].([]any)
	assert.Equal(t, FlavorName(moved), flavors[0].(map[string]any)["name"])

	// The topology taken out: the flat flavor of the pool's name again.
	flat := queuePool()
	_, err = k.Sync(ctx, flat, capacity24, []string{"team-a"}, false)
	require.NoError(t, err)
	assert.Nil(t, get(t, c, KueueTopology, "", TopologyName(moved)))
	assert.Nil(t, get(t, c, KueueFlavor, "", FlavorName(moved)))
	require.NotNil(t, get(t, c, KueueFlavor, "", pool.Name))
	assert.Nil(t, field(get(t, c, KueueFlavor, "", pool.Name), "spec", "topologyName"))

	require.NoError(t, k.Remove(ctx, flat))
	assert.Nil(t, get(t, c, KueueFlavor, "", pool.Name), "Remove deletes the flavor")
	assert.Nil(t, get(t, c, KueueClusterQueue, "", pool.Name), "and the ClusterQueue")
}

func TestFlavorNameFollowsWhatKueueFreezes(t *testing.T) {
	pool := topologyPool("rack")
	name := FlavorName(pool)
	pool.Spec.Exclusive = !pool.Spec.Exclusive
	assert.NotEqual(t, name, FlavorName(pool), "tolerations are frozen with topologyName: exclusive on or off is a new flavor")
	assert.Equal(t, "train", FlavorName(queuePool()), "without a topology the flavor is the pool's name, as before")
	assert.Empty(t, TopologyName(queuePool()))
	assert.Nil(t, KueueTopologyFor(queuePool()))
	bad := topologyPool("kubernetes.io/hostname", "rack")
	assert.Empty(t, TopologyName(bad), "an invalid topology (refused by R1) writes the queue flat")
}
