package inventory

import (
	"fmt"
	"sort"
	"strings"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

// deviceReads is what a DeviceClass's selectors read of a device: the attributes and
// capacities they name with constant keys (besides the driver and
// allowMultipleAllocations, which every key holds). Two devices that agree on these
// get the same verdict, so the class is evaluated once per distinct key instead of once
// per device: GPUs of one model differ in their uuid or PCI address, which a selector
// for the model does not read.
type deviceReads struct {
	attributes, capacity []domainRef
}

// domainRef is device.attributes["domain"].id (or capacity); an empty id is the whole
// domain's map ("x" in device.attributes["domain"], a comprehension over it).
type domainRef struct{ domain, id string }

// readsOf parses each selector with the environment it was compiled in and returns what
// they read; ok is false when one reads the device another way (the device, or a map of
// it, passed on as a whole, or looked up with a computed key): then every device is
// evaluated.
func readsOf(parse func(expr string) (ast.Expr, bool), selectors []string) (deviceReads, bool) {
	var r deviceReads
	for _, s := range selectors {
		e, ok := parse(s)
		if !ok || !r.walk(e) {
			return deviceReads{}, false
		}
	}
	return r, true
}

func (r *deviceReads) walk(e ast.Expr) bool {
	if field, ref, ok := deviceRef(e); ok {
		if field == "attributes" {
			r.attributes = append(r.attributes, ref)
		} else {
			r.capacity = append(r.capacity, ref)
		}
		return true
	}
	switch e.Kind() {
	case ast.LiteralKind, ast.UnspecifiedExprKind:
		return true
	case ast.IdentKind:
		return e.AsIdent() != "device"
	case ast.SelectKind:
		s := e.AsSelect()
		if isIdent(s.Operand(), "device") {
			return s.FieldName() == "driver" || s.FieldName() == "allowMultipleAllocations"
		}
		return r.walk(s.Operand())
	case ast.CallKind:
		c := e.AsCall()
		if c.IsMemberFunction() && !r.walk(c.Target()) {
			return false
		}
		return r.walkAll(c.Args())
	case ast.ListKind:
		return r.walkAll(e.AsList().Elements())
	case ast.MapKind:
		for _, entry := range e.AsMap().Entries() {
			me := entry.AsMapEntry()
			if !r.walk(me.Key()) || !r.walk(me.Value()) {
				return false
			}
		}
		return true
	case ast.StructKind:
		for _, f := range e.AsStruct().Fields() {
			if !r.walk(f.AsStructField().Value()) {
				return false
			}
		}
		return true
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		return r.walkAll([]ast.Expr{c.IterRange(), c.AccuInit(), c.LoopCondition(), c.LoopStep(), c.Result()})
	}
	return false
}

func (r *deviceReads) walkAll(es []ast.Expr) bool {
	for _, e := range es {
		if !r.walk(e) {
			return false
		}
	}
	return true
}

// deviceRef recognises device.attributes["d"].id, device.attributes["d"]["id"] and
// device.attributes["d"] (and the same of capacity), with constant keys.
func deviceRef(e ast.Expr) (field string, ref domainRef, ok bool) {
	switch e.Kind() {
	case ast.SelectKind:
		s := e.AsSelect()
		if field, domain, ok := domainMap(s.Operand()); ok {
			return field, domainRef{domain, s.FieldName()}, true
		}
	case ast.CallKind:
		c := e.AsCall()
		if c.FunctionName() == operators.Index && len(c.Args()) == 2 {
			if field, domain, ok := domainMap(c.Args()[0]); ok {
				if id, ok := stringLiteral(c.Args()[1]); ok {
					return field, domainRef{domain, id}, true
				}
			}
		}
	}
	if field, domain, ok := domainMap(e); ok {
		return field, domainRef{domain: domain}, true
	}
	return "", domainRef{}, false
}

// domainMap recognises device.attributes["d"] and device.capacity["d"].
func domainMap(e ast.Expr) (field, domain string, ok bool) {
	if e.Kind() != ast.CallKind {
		return "", "", false
	}
	c := e.AsCall()
	if c.FunctionName() != operators.Index || len(c.Args()) != 2 || c.Args()[0].Kind() != ast.SelectKind {
		return "", "", false
	}
	s := c.Args()[0].AsSelect()
	if !isIdent(s.Operand(), "device") || (s.FieldName() != "attributes" && s.FieldName() != "capacity") {
		return "", "", false
	}
	domain, ok = stringLiteral(c.Args()[1])
	return s.FieldName(), domain, ok
}

func isIdent(e ast.Expr, name string) bool { return e.Kind() == ast.IdentKind && e.AsIdent() == name }

func stringLiteral(e ast.Expr) (string, bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}

// key is what the selectors read of device d of driver: equal keys, equal verdicts.
// An attribute of the driver's own domain may be written unqualified; both spellings
// go into the key.
func (r deviceReads) key(driver string, d *resourcev1.Device) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\x00%v", driver, ptr.Deref(d.AllowMultipleAllocations, false))
	for _, ref := range r.attributes {
		for _, name := range qualifiedNames(driver, ref, attributeNames(d)) {
			a := d.Attributes[resourcev1.QualifiedName(name)]
			fmt.Fprintf(&b, "\x00a%s=%v|%v|%v|%v", name, ptr.Deref(a.IntValue, 0), ptr.Deref(a.BoolValue, false),
				ptr.Deref(a.StringValue, ""), ptr.Deref(a.VersionValue, ""))
		}
	}
	for _, ref := range r.capacity {
		for _, name := range qualifiedNames(driver, ref, capacityNames(d)) {
			c := d.Capacity[resourcev1.QualifiedName(name)]
			fmt.Fprintf(&b, "\x00c%s=%s|%v", name, c.Value.String(), c.RequestPolicy)
		}
	}
	return b.String()
}

// qualifiedNames are the names of present that ref reads, sorted; a missing one reads
// as absent, which the key records by leaving it out.
func qualifiedNames(driver string, ref domainRef, present []string) []string {
	var out []string
	for _, name := range present {
		domain, id, qualified := strings.Cut(name, "/")
		if !qualified {
			domain, id = driver, name
		}
		if domain == ref.domain && (ref.id == "" || id == ref.id) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func attributeNames(d *resourcev1.Device) []string {
	names := make([]string, 0, len(d.Attributes))
	for n := range d.Attributes {
		names = append(names, string(n))
	}
	return names
}

func capacityNames(d *resourcev1.Device) []string {
	names := make([]string, 0, len(d.Capacity))
	for n := range d.Capacity {
		names = append(names, string(n))
	}
	return names
}
