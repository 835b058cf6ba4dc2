package inventory

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
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
// annotation, node name; node labels, litepool annotations, unschedulable, taints,
// accelerator allocatable and capacity, the Ready condition), and the Builder handles it
// exactly as it handles a full object. A test checks both paths agree on generated objects.
//
// Field numbers are those of k8s.io/api/core/v1/generated.proto and
// k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto.

// protobufMagic starts every protobuf response of the API server (runtime.Unknown follows).
var protobufMagic = []byte("k8s\x00")

var errNotProtobuf = errors.New("response is not protobuf")

// listItems unwraps a protobuf list response held in memory (see streamItems).
func listItems(body []byte, item func([]byte) error) (string, error) {
	var buf []byte
	return streamItems(bufio.NewReader(bytes.NewReader(body)), &buf, item)
}

// streamItems reads a protobuf list response (magic, runtime.Unknown whose raw field is
// the list) from r one item at a time: it calls item with the bytes of each element of
// the list's items, read into *buf (reused, grown to the largest item), and returns the
// list's continue token. Memory stays at one item, however large the page.
func streamItems(r *bufio.Reader, buf *[]byte, item func([]byte) error) (string, error) {
	magic := make([]byte, len(protobufMagic))
	if _, err := io.ReadFull(r, magic); err != nil || !bytes.Equal(magic, protobufMagic) {
		return "", errNotProtobuf
	}
	var cont string
	sawList := false
	envelope := &wireReader{r: r, left: math.MaxInt64}
	err := envelope.each(func(num protowire.Number, length int64) error {
		switch num {
		case 2: // Unknown.raw: the list
			sawList = true
			list := &wireReader{r: r, left: length, bounded: true}
			envelope.left -= length
			return list.each(func(num protowire.Number, length int64) error {
				switch num {
				case 1: // ListMeta: small; its continue token (3)
					meta, err := list.read(length, buf)
					if err != nil {
						return err
					}
					return fields(meta, func(num protowire.Number, _ protowire.Type, v []byte) error {
						if num == 3 {
							cont = string(v)
						}
						return nil
					})
				case 2: // an item
					b, err := list.read(length, buf)
					if err != nil {
						return err
					}
					return item(b)
				}
				return list.skip(length)
			})
		case 3: // Unknown.contentEncoding
			if length > 0 {
				return fmt.Errorf("unsupported content encoding")
			}
		}
		return envelope.skip(length)
	})
	if err == nil && !sawList {
		err = fmt.Errorf("truncated message: the response holds no list")
	}
	return cont, err
}

// wireReader reads protobuf fields from a stream, at most left bytes.
type wireReader struct {
	r       *bufio.Reader
	left    int64
	bounded bool // a message of known length, not the whole stream
}

func (w *wireReader) ReadByte() (byte, error) {
	if w.left <= 0 {
		return 0, io.EOF
	}
	b, err := w.r.ReadByte()
	if err == nil {
		w.left--
	}
	return b, err
}

// each calls fn for every length-delimited field (fn must read or skip length bytes);
// other fields are skipped. It ends cleanly at the end of the stream or of the limit.
func (w *wireReader) each(fn func(num protowire.Number, length int64) error) error {
	for {
		tag, err := binary.ReadUvarint(w)
		if err == io.EOF {
			if w.bounded && w.left > 0 { // the stream ended inside the message
				return fmt.Errorf("truncated message: %d bytes missing", w.left)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("truncated message: %w", err)
		}
		num, typ := protowire.Number(tag>>3), protowire.Type(tag&7)
		switch typ {
		case protowire.BytesType:
			n, err := binary.ReadUvarint(w)
			if err != nil {
				return fmt.Errorf("truncated message: %w", noEOF(err))
			}
			// Compared unsigned: a length above MaxInt64 would be negative as an int64.
			if n > uint64(max(w.left, 0)) {
				return fmt.Errorf("truncated message: field %d wants %d bytes, %d left", num, n, w.left)
			}
			if err := fn(num, int64(n)); err != nil {
				return err
			}
		case protowire.VarintType:
			if _, err := binary.ReadUvarint(w); err != nil {
				return fmt.Errorf("truncated message: %w", noEOF(err))
			}
		case protowire.Fixed32Type:
			err = w.skip(4)
		case protowire.Fixed64Type:
			err = w.skip(8)
		default:
			return fmt.Errorf("unsupported wire type %d in field %d", typ, num)
		}
		if err != nil {
			return err
		}
	}
}

// maxItem bounds one list item. etcd stores objects of at most 1.5 MiB; a larger length
// is a corrupt stream, and must not become an allocation of that size.
const maxItem = 32 << 20

// read reads n bytes into *buf (grown as needed) and returns them.
func (w *wireReader) read(n int64, buf *[]byte) ([]byte, error) {
	if n > maxItem {
		return nil, fmt.Errorf("list item of %d bytes: larger than any object the API server stores", n)
	}
	if int64(cap(*buf)) < n {
		*buf = make([]byte, n)
	}
	b := (*buf)[:n]
	if _, err := io.ReadFull(w.r, b); err != nil {
		return nil, fmt.Errorf("truncated message: %w", noEOF(err))
	}
	w.left -= n
	return b, nil
}

func (w *wireReader) skip(n int64) error {
	if n > w.left {
		return fmt.Errorf("truncated message: %d bytes to skip, %d left", n, w.left)
	}
	if _, err := w.r.Discard(int(n)); err != nil {
		return fmt.Errorf("truncated message: %w", noEOF(err))
	}
	w.left -= n
	return nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
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
	if n, ok := smallInt(s); ok { // device counts: "1", "8"; no string, no parsing
		return *resource.NewQuantity(n, resource.DecimalSI), nil
	}
	return resource.ParseQuantity(string(s))
}

// smallInt reads a plain decimal of up to 9 digits.
func smallInt(s []byte) (int64, bool) {
	if len(s) == 0 || len(s) > 9 {
		return 0, false
	}
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// acceleratorMap reads map<string, Quantity> entries, keeping accelerators (of accel) only.
func acceleratorMap(list *corev1.ResourceList, entry []byte, accel policy.Accelerators) error {
	key, value, err := mapEntry(entry)
	if err != nil {
		return err
	}
	// Most keys are cpu, memory, pods...: no slash, not an accelerator; skip them
	// without making a string.
	if bytes.IndexByte(key, '/') < 0 || !accel.Is(corev1.ResourceName(key)) {
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

// scanPod fills pod (reset first, its container slices reused) with what the inventory
// reads from a Pod message. names interns node names: 40,000 pods share 5,000.
func scanPod(b []byte, pod *corev1.Pod, names map[string]string, accel policy.Accelerators) error {
	containers, inits := pod.Spec.Containers[:0], pod.Spec.InitContainers[:0]
	*pod = corev1.Pod{}
	pod.Spec.Containers, pod.Spec.InitContainers = containers, inits
	return fields(b, func(num protowire.Number, _ protowire.Type, v []byte) error {
		switch num {
		case 1:
			return scanPodMeta(v, pod)
		case 2:
			return scanPodSpec(v, &pod.Spec, names, accel)
		case 3: // PodStatus.phase (1)
			return fields(v, func(num protowire.Number, _ protowire.Type, v []byte) error {
				if num == 1 {
					pod.Status.Phase = podPhase(v)
				}
				return nil
			})
		}
		return nil
	})
}

// podPhase returns the phase as a constant, without making a string.
func podPhase(v []byte) corev1.PodPhase {
	for _, p := range []corev1.PodPhase{corev1.PodRunning, corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown} {
		if string(v) == string(p) {
			return p
		}
	}
	return corev1.PodPhase(v)
}

// intern returns the string of v, the same one every time.
func intern(names map[string]string, v []byte) string {
	if s, ok := names[string(v)]; ok {
		return s
	}
	s := string(v)
	names[s] = s
	return s
}

func scanPodMeta(b []byte, pod *corev1.Pod) error {
	return fields(b, func(num protowire.Number, _ protowire.Type, v []byte) error {
		switch num {
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
			kind := "other"
			var controller bool
			err := fields(v, func(num protowire.Number, _ protowire.Type, v []byte) error {
				switch num {
				case 1: // only DaemonSet owners matter (they are not workloads)
					if string(v) == "DaemonSet" {
						kind = "DaemonSet"
					}
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

func scanPodSpec(b []byte, spec *corev1.PodSpec, names map[string]string, accel policy.Accelerators) error {
	return fields(b, func(num protowire.Number, _ protowire.Type, v []byte) error {
		switch num {
		case 2:
			c, err := scanContainer(v, accel)
			spec.Containers = append(spec.Containers, c)
			return err
		case 20:
			c, err := scanContainer(v, accel)
			spec.InitContainers = append(spec.InitContainers, c)
			return err
		case 10:
			spec.NodeName = intern(names, v)
		case 32:
			return acceleratorMap(&spec.Overhead, v, accel)
		}
		return nil
	})
}

// scanContainer keeps a container's accelerator requests and limits and its restart
// policy (an init container with Always is a sidecar).
func scanContainer(b []byte, accel policy.Accelerators) (corev1.Container, error) {
	var c corev1.Container
	err := fields(b, func(num protowire.Number, _ protowire.Type, v []byte) error {
		switch num {
		case 8:
			return fields(v, func(num protowire.Number, _ protowire.Type, v []byte) error {
				switch num {
				case 1:
					return acceleratorMap(&c.Resources.Limits, v, accel)
				case 2:
					return acceleratorMap(&c.Resources.Requests, v, accel)
				}
				return nil
			})
		case 24: // only Always matters (a sidecar)
			if string(v) == string(corev1.ContainerRestartPolicyAlways) {
				c.RestartPolicy = &restartAlways
			} else {
				c.RestartPolicy = &restartOther
			}
		}
		return nil
	})
	return c, err
}

// scanNode fills node (reset first) with what the inventory reads from a Node message.
func scanNode(b []byte, node *corev1.Node, accel policy.Accelerators) error {
	*node = corev1.Node{}
	return fields(b, func(num protowire.Number, _ protowire.Type, v []byte) error {
		switch num {
		case 1:
			return scanNodeMeta(v, node)
		case 2: // NodeSpec.unschedulable (4), taints (5): NodeOut reads both
			return fields(v, func(num protowire.Number, _ protowire.Type, v []byte) error {
				switch num {
				case 4:
					node.Spec.Unschedulable = v != nil
				case 5:
					return scanTaint(v, node)
				}
				return nil
			})
		case 3:
			return scanNodeStatus(v, node, accel)
		}
		return nil
	})
}

// scanTaint appends a Taint message's key (1), value (2) and effect (3).
func scanTaint(b []byte, node *corev1.Node) error {
	var t corev1.Taint
	err := fields(b, func(num protowire.Number, _ protowire.Type, v []byte) error {
		switch num {
		case 1:
			t.Key = string(v)
		case 2:
			t.Value = string(v)
		case 3:
			t.Effect = corev1.TaintEffect(v)
		}
		return nil
	})
	node.Spec.Taints = append(node.Spec.Taints, t)
	return err
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

func scanNodeStatus(b []byte, node *corev1.Node, accel policy.Accelerators) error {
	return fields(b, func(num protowire.Number, _ protowire.Type, v []byte) error {
		switch num {
		case 1: // capacity: a domain's per-node count (policy.Topology.Domains)
			return acceleratorMap(&node.Status.Capacity, v, accel)
		case 2:
			return acceleratorMap(&node.Status.Allocatable, v, accel)
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

var (
	yes, no       = true, false
	restartAlways = corev1.ContainerRestartPolicyAlways
	restartOther  = corev1.ContainerRestartPolicy("Other")
)

func ownerRef(kind string, controller bool) metav1.OwnerReference {
	if controller {
		return metav1.OwnerReference{Kind: kind, Controller: &yes}
	}
	return metav1.OwnerReference{Kind: kind, Controller: &no}
}
