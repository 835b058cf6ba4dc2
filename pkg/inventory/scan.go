package inventory

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// The scanners below read the API server's protobuf list responses field by field and
// keep only what the inventory looks at, instead of decoding every pod and node in full.
// Decoding is most of the cost of a large list (time and garbage): a 40,000-pod cluster
// carries env, volumes, probes, statuses and managed fields the inventory never reads.
//
// They do not interpret anything themselves: each item becomes a slim corev1.Pod or
// corev1.Node holding just the fields the policy functions read (requests and limits of
// accelerators, init-container restart policies, overhead, phase, owner kinds, mirror
// annotation, node name; node labels, litepool annotations, unschedulable, accelerator
// allocatable, the Ready condition), and the Builder handles it exactly as it handles a
// full object. A test checks both paths agree on generated objects.
//
// Field numbers are those of k8s.io/api/core/v1/generated.proto and
// k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto.

// protobufMagic starts every protobuf response of the API server (runtime.Unknown follows).
var protobufMagic = []byte("k8s\x00")

var errNotProtobuf = errors.New("response is not protobuf")

// listItems unwraps a protobuf list response: it calls item for the bytes of each
// element of the list's items and returns the list's continue token.
func listItems(body []byte, item func([]byte) error) (string, error) {
	if !bytes.HasPrefix(body, protobufMagic) {
		return "", errNotProtobuf
	}
	var raw []byte
	err := fields(body[len(protobufMagic):], func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch num {
		case 2: // Unknown.raw
			raw = v
		case 3: // Unknown.contentEncoding
			if len(v) > 0 {
				return fmt.Errorf("unsupported content encoding %q", v)
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	var cont string
	err = fields(raw, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch num {
		case 1: // ListMeta
			return fields(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				if num == 3 { // continue
					cont = string(v)
				}
				return nil
			})
		case 2: // items
			return item(v)
		}
		return nil
	})
	return cont, err
}

// fields calls fn for each field of a message. For length-delimited fields v is the
// payload; for others v is nil (the scanners read no scalar but bools, see boolField).
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			var x uint64
			x, n = protowire.ConsumeVarint(b)
			if x != 0 {
				v = varintTrue
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v); err != nil {
			return err
		}
	}
	return nil
}

// varintTrue marks a non-zero varint (a true bool) for fields' callers.
var varintTrue = []byte{1}

// mapEntry reads a map<string, X> entry: key (1) and the raw value (2).
func mapEntry(b []byte) (key, value []byte, err error) {
	err = fields(b, func(num protowire.Number, _ protowire.Type, v []byte) error {
		switch num {
		case 1:
			key = v
		case 2:
			value = v
		}
		return nil
	})
	return key, value, err
}

// quantity reads a resource.Quantity message (its string, field 1).
func quantity(b []byte) (resource.Quantity, error) {
	var s []byte
	if err := fields(b, func(num protowire.Number, _ protowire.Type, v []byte) error {
		if num == 1 {
			s = v
		}
		return nil
	}); err != nil {
		return resource.Quantity{}, err
	}
	return resource.ParseQuantity(string(s))
}

// acceleratorMap reads map<string, Quantity> entries, keeping accelerators only.
func acceleratorMap(list *corev1.ResourceList, entry []byte) error {
	key, value, err := mapEntry(entry)
	if err != nil {
		return err
	}
	// Most keys are cpu, memory, pods...: no slash, not an accelerator; skip them
	// without making a string.
	if bytes.IndexByte(key, '/') < 0 || !policy.IsAccelerator(corev1.ResourceName(key)) {
		return nil
	}
	q, err := quantity(value)
	if err != nil {
		return err
	}
	if *list == nil {
		*list = corev1.ResourceList{}
	}
	(*list)[corev1.ResourceName(key)] = q
	return nil
}

// scanPod fills pod (reset first) with what the inventory reads from a Pod message.
func scanPod(b []byte, pod *corev1.Pod) error {
	*pod = corev1.Pod{}
	return fields(b, func(num protowire.Number, _ protowire.Type, v []byte) error {
		switch num {
		case 1:
			return scanPodMeta(v, pod)
		case 2:
			return scanPodSpec(v, &pod.Spec)
		case 3: // PodStatus.phase (1)
			return fields(v, func(num protowire.Number, _ protowire.Type, v []byte) error {
				if num == 1 {
					pod.Status.Phase = corev1.PodPhase(v)
				}
				return nil
			})
		}
		return nil
	})
}

func scanPodMeta(b []byte, pod *corev1.Pod) error {
	return fields(b, func(num protowire.Number, _ protowire.Type, v []byte) error {
		switch num {
		case 1:
			pod.Name = string(v)
		case 3:
			pod.Namespace = string(v)
		case 12: // annotations: only whether the pod is a mirror pod matters
			key, _, err := mapEntry(v)
			if err == nil && string(key) == corev1.MirrorPodAnnotationKey {
				if pod.Annotations == nil {
					pod.Annotations = map[string]string{}
				}
				pod.Annotations[corev1.MirrorPodAnnotationKey] = ""
			}
			return err
		case 13: // ownerReferences: kind (1) and controller (6)
			var kind string
			var controller bool
			err := fields(v, func(num protowire.Number, _ protowire.Type, v []byte) error {
				switch num {
				case 1:
					kind = string(v)
				case 6:
					controller = v != nil
				}
				return nil
			})
			if err != nil {
				return err
			}
			pod.OwnerReferences = append(pod.OwnerReferences, ownerRef(kind, controller))
		}
		return nil
	})
}

func scanPodSpec(b []byte, spec *corev1.PodSpec) error {
	return fields(b, func(num protowire.Number, _ protowire.Type, v []byte) error {
		switch num {
		case 2:
			c, err := scanContainer(v)
			spec.Containers = append(spec.Containers, c)
			return err
		case 20:
			c, err := scanContainer(v)
			spec.InitContainers = append(spec.InitContainers, c)
			return err
		case 10:
			spec.NodeName = string(v)
		case 32:
			return acceleratorMap(&spec.Overhead, v)
		}
		return nil
	})
}

// scanContainer keeps a container's accelerator requests and limits and its restart
// policy (an init container with Always is a sidecar).
func scanContainer(b []byte) (corev1.Container, error) {
	var c corev1.Container
	err := fields(b, func(num protowire.Number, _ protowire.Type, v []byte) error {
		switch num {
		case 8:
			return fields(v, func(num protowire.Number, _ protowire.Type, v []byte) error {
				switch num {
				case 1:
					return acceleratorMap(&c.Resources.Limits, v)
				case 2:
					return acceleratorMap(&c.Resources.Requests, v)
				}
				return nil
			})
		case 24:
			p := corev1.ContainerRestartPolicy(v)
			c.RestartPolicy = &p
		}
		return nil
	})
	return c, err
}

// scanNode fills node (reset first) with what the inventory reads from a Node message.
func scanNode(b []byte, node *corev1.Node) error {
	*node = corev1.Node{}
	return fields(b, func(num protowire.Number, _ protowire.Type, v []byte) error {
		switch num {
		case 1:
			return scanNodeMeta(v, node)
		case 2: // NodeSpec.unschedulable (4)
			return fields(v, func(num protowire.Number, _ protowire.Type, v []byte) error {
				if num == 4 {
					node.Spec.Unschedulable = v != nil
				}
				return nil
			})
		case 3:
			return scanNodeStatus(v, node)
		}
		return nil
	})
}

func scanNodeMeta(b []byte, node *corev1.Node) error {
	return fields(b, func(num protowire.Number, _ protowire.Type, v []byte) error {
		switch num {
		case 1:
			node.Name = string(v)
		case 11: // labels: all of them (pool, gpu-type and driver labels of every vendor)
			key, value, err := mapEntry(v)
			if err != nil {
				return err
			}
			if node.Labels == nil {
				node.Labels = map[string]string{}
			}
			node.Labels[string(key)] = string(value)
		case 12: // annotations: litepool's own (upgrade state, draining)
			key, value, err := mapEntry(v)
			if err != nil || !strings.HasPrefix(string(key), policy.Prefix) {
				return err
			}
			if node.Annotations == nil {
				node.Annotations = map[string]string{}
			}
			node.Annotations[string(key)] = string(value)
		}
		return nil
	})
}

func scanNodeStatus(b []byte, node *corev1.Node) error {
	return fields(b, func(num protowire.Number, _ protowire.Type, v []byte) error {
		switch num {
		case 2:
			return acceleratorMap(&node.Status.Allocatable, v)
		case 4: // conditions: Ready only
			var typ, status []byte
			err := fields(v, func(num protowire.Number, _ protowire.Type, v []byte) error {
				switch num {
				case 1:
					typ = v
				case 2:
					status = v
				}
				return nil
			})
			if err == nil && string(typ) == string(corev1.NodeReady) {
				node.Status.Conditions = append(node.Status.Conditions,
					corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionStatus(status)})
			}
			return err
		}
		return nil
	})
}

func ownerRef(kind string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{Kind: kind, Controller: &controller}
}
