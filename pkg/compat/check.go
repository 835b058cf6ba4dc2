package compat

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Verdict is what the matrix says about one link of a version chain.
type Verdict string

const (
	// Compatible: the matrix lists the pairing.
	Compatible Verdict = "compatible"
	// Incompatible: the matrix says otherwise (a different pairing is published, or an
	// explicit incompatibility).
	Incompatible Verdict = "incompatible"
	// Unknown: a version the matrix does not know, or nothing to check it against.
	// Never treated as compatible.
	Unknown Verdict = "unknown"
	// NotDeclared: no version given for this link; nothing checked.
	NotDeclared Verdict = "not-declared"
)

// Vendors of a chain.
const (
	VendorAscend = "huawei-ascend"
	VendorNVIDIA = "nvidia"
)

// Chain is the versions checked: hardware → driver → firmware → CANN → torch_npu (→
// PyTorch) → image for Ascend; GPU → driver → CUDA → PyTorch → image for NVIDIA. The
// software is a Pool's spec.software, the same type: the hardware is the one link a
// Pool declares elsewhere (spec.accelerator.type) or its nodes report. Empty fields are
// not declared.
type Chain struct {
	Hardware string `json:"hardware,omitempty"`
	v1alpha1.SoftwareSpec
}

// Link is the verdict on one link with its reason and the matrix row's source.
type Link struct {
	Link    string  `json:"link"`
	Value   string  `json:"value,omitempty"`
	Verdict Verdict `json:"verdict"`
	Reason  string  `json:"reason"`
	Source  string  `json:"source,omitempty"`
}

// Result is the verdict on a whole chain: incompatible when any link is, unknown
// when any link is unknown, compatible only when every declared link is.
type Result struct {
	Vendor  string  `json:"vendor"`
	Chain   Chain   `json:"chain"`
	Links   []Link  `json:"links"`
	Verdict Verdict `json:"verdict"`
}

// Err explains a chain that is not compatible ([C1]); nil when it is.
func (r Result) Err() error {
	if r.Verdict == Compatible {
		return nil
	}
	var parts []string
	for _, l := range r.Links {
		if l.Verdict == Incompatible || l.Verdict == Unknown {
			parts = append(parts, fmt.Sprintf("%s %s %s: %s", l.Link, l.Value, l.Verdict, l.Reason))
		}
	}
	return policy.Violationf("C1", "version chain is %s: %s", r.Verdict, strings.Join(parts, "; "))
}

// Check checks a version chain against the matrix. It is a pure function: the
// same matrix and chain always give the same result.
func Check(m *Matrix, c Chain) Result {
	var res Result
	switch vendorOf(m, c) {
	case VendorAscend:
		res = checkAscend(m, c)
	case VendorNVIDIA:
		res = checkNVIDIA(m, c)
	default:
		res = Result{Links: []Link{link("hardware", c.Hardware, Unknown,
			"hardware model not in the matrix (neither an Ascend model nor an NVIDIA GPU it lists)", "")}}
		for _, l := range []struct{ name, v string }{{"driver", c.Driver}, {"firmware", c.Firmware}, {"cann", c.CANN},
			{"torch_npu", c.TorchNPU}, {"pytorch", c.PyTorch}, {"cuda", c.CUDA}, {"image", c.Image}} {
			if l.v != "" {
				res.Links = append(res.Links, link(l.name, l.v, Unknown, "unknown hardware: nothing to check it against", ""))
			}
		}
	}
	res.Chain = c
	res.Verdict = Compatible
	for _, l := range res.Links {
		switch l.Verdict {
		case Incompatible:
			res.Verdict = Incompatible
		case Unknown:
			if res.Verdict != Incompatible {
				res.Verdict = Unknown
			}
		}
	}
	return res
}

func link(name, value string, v Verdict, reason, source string) Link {
	if value == "" && v != NotDeclared {
		v, reason = NotDeclared, "not declared"
	}
	return Link{Link: name, Value: value, Verdict: v, Reason: reason, Source: source}
}

func notDeclared(name string) Link {
	return Link{Link: name, Verdict: NotDeclared, Reason: "not declared"}
}

// vendorOf decides which half of the matrix a chain belongs to: by its hardware first,
// then by the software it names.
func vendorOf(m *Matrix, c Chain) string {
	if c.Hardware != "" {
		if len(ascendHardware(m, c.Hardware)) > 0 {
			return VendorAscend
		}
		if _, ok := nvidiaGPU(m, c.Hardware); ok {
			return VendorNVIDIA
		}
	}
	switch {
	case c.CANN != "" || c.TorchNPU != "" || c.Firmware != "":
		return VendorAscend
	case c.CUDA != "":
		return VendorNVIDIA
	}
	if v, ok := parseVersion(c.Driver); ok && len(v.Components()) == 3 && v.Major() >= 300 {
		return VendorNVIDIA // NVIDIA drivers read 535.104.05; Ascend ones 24.1.0.3
	}
	return ""
}

// ---- Ascend ----

type hwMatch struct {
	hw       *AscendHardware
	name     string // as asked
	inferred bool
}

// ascendHardware finds the hardware entries a model name means: direct matches on the
// model or its aliases first, then entries that list it as an inferred alias.
func ascendHardware(m *Matrix, name string) []hwMatch {
	want := normName(name)
	var direct, inferred []hwMatch
	for i := range m.Vendors.Ascend.Hardware {
		hw := &m.Vendors.Ascend.Hardware[i]
		if normName(hw.Model) == want || anyNorm(hw.Aliases, want) {
			direct = append(direct, hwMatch{hw: hw, name: name})
		} else if anyNorm(hw.AliasesInferred, want) {
			inferred = append(inferred, hwMatch{hw: hw, name: name, inferred: true})
		}
	}
	return append(direct, inferred...)
}

func anyNorm(names []string, want string) bool {
	for _, n := range names {
		if normName(n) == want {
			return true
		}
	}
	return false
}

// normName lowercases a model name and drops parentheticals and separators, so that
// "Ascend910B (chip_type 910b)", "ascend-910b" and "Ascend 910B" compare equal.
func normName(s string) string {
	if i := strings.Index(s, "("); i >= 0 {
		s = s[:i]
	}
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

type relMatch struct {
	hw  hwMatch
	rel *AscendRelease
}

func ascendReleases(hws []hwMatch, driver string) []relMatch {
	var out []relMatch
	for _, h := range hws {
		for i := range h.hw.Releases {
			r := &h.hw.Releases[i]
			if r.Driver != "" && strings.EqualFold(r.Driver, driver) {
				out = append(out, relMatch{h, r})
			}
		}
	}
	return out
}

func hwName(h hwMatch) string {
	if h.inferred {
		return h.hw.Model + ", which lists " + h.name + " as an INFERRED alias"
	}
	return h.hw.Model
}

func checkAscend(m *Matrix, c Chain) Result {
	res := Result{Vendor: VendorAscend}
	hws := ascendHardware(m, c.Hardware)
	switch {
	case c.Hardware == "":
		res.Links = append(res.Links, notDeclared("hardware"))
	case len(hws) == 0:
		res.Links = append(res.Links, link("hardware", c.Hardware, Unknown, "Ascend hardware model not in the matrix", ""))
	default:
		res.Links = append(res.Links, link("hardware", c.Hardware, Compatible, "known Ascend model: "+hwName(hws[0]), ""))
	}

	rels := ascendReleases(hws, c.Driver)
	res.Links = append(res.Links, ascendDriverLink(hws, rels, c))
	res.Links = append(res.Links, ascendFirmwareLink(rels, c))
	cann := ascendCANNLink(m, hws, rels, c.Driver, c.CANN)
	res.Links = append(res.Links, cann)
	res.Links = append(res.Links, torchNPULinks(m, c)...)
	res.Links = append(res.Links, ascendImageLink(m, hws, rels, c))
	return res
}

func ascendDriverLink(hws []hwMatch, rels []relMatch, c Chain) Link {
	switch {
	case c.Driver == "":
		return notDeclared("driver")
	case len(hws) == 0:
		return link("driver", c.Driver, Unknown, "hardware unknown: nothing to check the driver against", "")
	case len(rels) > 0:
		r := rels[0]
		reason := "published for " + hwName(r.hw)
		if r.rel.Status != "" {
			reason += ": " + r.rel.Status
		}
		return link("driver", c.Driver, Compatible, reason, r.rel.Source)
	}
	return link("driver", c.Driver, Unknown, fmt.Sprintf("driver not listed for %s in the matrix (listed: %s)",
		hwName(hws[0]), strings.Join(knownDrivers(hws), ", ")), "")
}

func knownDrivers(hws []hwMatch) []string {
	seen := map[string]bool{}
	var out []string
	for _, h := range hws {
		for _, r := range h.hw.Releases {
			if r.Driver != "" && !seen[strings.ToLower(r.Driver)] {
				seen[strings.ToLower(r.Driver)] = true
				out = append(out, r.Driver)
			}
		}
	}
	return out
}

func ascendFirmwareLink(rels []relMatch, c Chain) Link {
	if c.Firmware == "" {
		return notDeclared("firmware")
	}
	if len(rels) == 0 {
		return link("firmware", c.Firmware, Unknown, "driver unknown: nothing to check the firmware against", "")
	}
	var published []string
	for _, r := range rels {
		if r.rel.Firmware == "" {
			continue
		}
		if strings.EqualFold(r.rel.Firmware, c.Firmware) {
			return link("firmware", c.Firmware, Compatible, "published with driver "+c.Driver, r.rel.Source)
		}
		published = append(published, r.rel.Firmware)
	}
	if len(published) == 0 {
		return link("firmware", c.Firmware, Unknown, "the matrix gives no firmware for driver "+c.Driver, rels[0].rel.Source)
	}
	return link("firmware", c.Firmware, Incompatible, fmt.Sprintf("driver %s is published with firmware %s",
		c.Driver, strings.Join(dedupe(published), ", ")), rels[0].rel.Source)
}

// ascendCANNLink checks CANN against the driver: a driver row that lists it, then the
// CANN/HDK compatibility statements (sets and wildcards), then explicit
// incompatibilities; a known driver whose rows do not list a CANN the matrix knows is
// incompatible.
func ascendCANNLink(m *Matrix, hws []hwMatch, rels []relMatch, driver, cann string) Link {
	if cann == "" {
		return notDeclared("cann")
	}
	if driver == "" {
		return link("cann", cann, Unknown, "no driver declared to check CANN against", "")
	}
	var listed []string
	for _, r := range rels {
		for _, v := range r.rel.CANN {
			if strings.EqualFold(v, cann) {
				return link("cann", cann, Compatible, fmt.Sprintf("listed with driver %s for %s", driver, hwName(r.hw)), r.rel.Source)
			}
			listed = append(listed, v)
		}
	}
	for _, e := range m.Vendors.Ascend.CANNHDKCompat {
		if !cannIn(e, cann) {
			continue
		}
		hdks := append(append(append([]string{}, e.HDKCompatible...), e.HDKMapped...), e.HDKSet...)
		if e.HDKRequiredByInstaller != "" {
			hdks = append(hdks, e.HDKRequiredByInstaller)
		}
		for _, h := range hdks {
			if hdkMatches(h, driver) {
				reason := fmt.Sprintf("CANN %s works with HDK %s", cann, h)
				if e.Context != "" {
					reason += " (" + e.Context + ")"
				}
				return link("cann", cann, Compatible, reason, e.Source)
			}
		}
	}
	for _, e := range m.Vendors.Ascend.CANNHDKCompat {
		if !cannIn(e, cann) {
			continue
		}
		for _, h := range e.HDKIncompatible {
			if hdkMatches(h, driver) {
				return link("cann", cann, Incompatible, fmt.Sprintf("CANN %s is incompatible with HDK %s", cann, h), e.Source)
			}
		}
	}
	if len(rels) > 0 && cannKnown(m, cann) {
		reason := fmt.Sprintf("driver %s is published with CANN %s, and no CANN/HDK statement pairs CANN %s with it",
			driver, listOrNone(dedupe(listed)), cann)
		return link("cann", cann, Incompatible, reason, rels[0].rel.Source)
	}
	if !cannKnown(m, cann) {
		return link("cann", cann, Unknown, "CANN version not in the matrix", "")
	}
	return link("cann", cann, Unknown, "no statement pairs this CANN with driver "+driver, "")
}

func listOrNone(items []string) string {
	if len(items) == 0 {
		return "(none)"
	}
	return strings.Join(items, ", ")
}

func cannIn(e CANNHDKCompat, cann string) bool {
	if e.CANN != "" && wildMatch(e.CANN, cann) {
		return true
	}
	for _, v := range e.CANNSet {
		if wildMatch(v, cann) {
			return true
		}
	}
	return false
}

// cannKnown says whether a CANN version appears anywhere in the Ascend matrix.
func cannKnown(m *Matrix, cann string) bool {
	a := &m.Vendors.Ascend
	for _, hw := range a.Hardware {
		for _, r := range hw.Releases {
			for _, v := range r.CANN {
				if strings.EqualFold(v, cann) {
					return true
				}
			}
		}
	}
	for _, e := range a.CANNHDKCompat {
		if cannIn(e, cann) {
			return true
		}
	}
	for _, t := range a.TorchNPU {
		if strings.EqualFold(t.CANN, cann) {
			return true
		}
	}
	return false
}

// wildMatch compares versions case-insensitively; a pattern ending in ".X" matches any
// version under that prefix ("9.1.X" matches 9.1.0).
func wildMatch(pattern, v string) bool {
	p, v := strings.ToLower(strings.TrimSpace(pattern)), strings.ToLower(strings.TrimSpace(v))
	if strings.HasSuffix(p, ".x") {
		return strings.HasPrefix(v, strings.TrimSuffix(p, "x"))
	}
	return p == v
}

// hdkMatches says whether a driver belongs to an HDK line as the matrix writes them:
// "25.2.X", "24.1.RC2", "26.0.RC1/25.7.RC1", "26.1.0 (other products)". A driver is on a
// line when it equals it or extends it ("24.1.0.3" is on 24.1.0).
func hdkMatches(pattern, driver string) bool {
	if i := strings.Index(pattern, "("); i >= 0 {
		pattern = pattern[:i]
	}
	d := strings.ToLower(strings.TrimSpace(driver))
	for _, alt := range strings.Split(pattern, "/") {
		p := strings.ToLower(strings.TrimSpace(alt))
		if p == "" {
			continue
		}
		if wildMatch(p, d) || strings.HasPrefix(d, p+".") {
			return true
		}
	}
	return false
}

func torchNPULinks(m *Matrix, c Chain) []Link {
	if c.TorchNPU == "" {
		out := []Link{notDeclared("torch_npu")}
		if c.PyTorch != "" {
			out = append(out, link("pytorch", c.PyTorch, Unknown, "no torch_npu declared to check PyTorch against", ""))
		}
		return out
	}
	var rows []TorchNPURow
	for _, t := range m.Vendors.Ascend.TorchNPU {
		if strings.EqualFold(t.TorchNPU, c.TorchNPU) {
			rows = append(rows, t)
		}
	}
	var out []Link
	switch {
	case len(rows) == 0:
		out = append(out, link("torch_npu", c.TorchNPU, Unknown, "torch_npu version not in the matrix", ""))
	case c.CANN == "":
		out = append(out, link("torch_npu", c.TorchNPU, Unknown,
			fmt.Sprintf("no CANN declared to check against (torch_npu %s is built for CANN %s)", c.TorchNPU, rows[0].CANN), rows[0].Source))
	default:
		out = append(out, torchNPUCANN(m, rows, c))
	}
	if c.PyTorch != "" && len(rows) > 0 {
		if sameMinorOrExact(rows[0].PyTorch, c.PyTorch) {
			out = append(out, link("pytorch", c.PyTorch, Compatible, "torch_npu "+c.TorchNPU+" is built for PyTorch "+rows[0].PyTorch, rows[0].Source))
		} else {
			out = append(out, link("pytorch", c.PyTorch, Incompatible, "torch_npu "+c.TorchNPU+" is built for PyTorch "+rows[0].PyTorch, rows[0].Source))
		}
	} else if c.PyTorch != "" {
		out = append(out, link("pytorch", c.PyTorch, Unknown, "torch_npu unknown: nothing to check PyTorch against", ""))
	}
	return out
}

func torchNPUCANN(m *Matrix, rows []TorchNPURow, c Chain) Link {
	var built []string
	for _, r := range rows {
		if strings.EqualFold(r.CANN, c.CANN) {
			return link("torch_npu", c.TorchNPU, Compatible, "built for CANN "+r.CANN, r.Source)
		}
		built = append(built, r.CANN)
	}
	for _, r := range rows {
		for _, e := range m.Vendors.Ascend.TorchNPUCANNCompat {
			if r.AscendExtensionVersion == "" || e.AscendExtensionVersion != r.AscendExtensionVersion {
				continue
			}
			for _, v := range e.CANNCompatible {
				if strings.EqualFold(v, c.CANN) {
					return link("torch_npu", c.TorchNPU, Compatible, fmt.Sprintf(
						"Ascend Extension for PyTorch %s supports CANN %s", e.AscendExtensionVersion, c.CANN), e.Source)
				}
			}
		}
	}
	return link("torch_npu", c.TorchNPU, Incompatible, fmt.Sprintf("torch_npu %s is built for CANN %s, not %s",
		c.TorchNPU, strings.Join(dedupe(built), ", "), c.CANN), rows[0].Source)
}

// sameMinorOrExact: "2.1" matches "2.1.0"; "2.1.0" matches "2.1.0".
func sameMinorOrExact(published, declared string) bool {
	p, d := strings.ToLower(published), strings.ToLower(declared)
	return p == d || strings.HasPrefix(p, d+".") || strings.HasPrefix(d, p+".")
}

var (
	cannInTag   = regexp.MustCompile(`(?i)cann[_-]v?(\d+\.\d+\.[0-9a-z]+(?:\.[0-9a-z]+)*)`)
	cannBaseTag = regexp.MustCompile(`(?i)/cann:(\d+\.\d+\.[0-9a-z]+(?:\.[0-9a-z]+)*)-`)
)

// ImageCANN reads the CANN version an image name carries ("...-cann_8.2.rc1-py_3.11-...",
// "quay.io/ascend/cann:8.2.rc1-910b-..."), or "".
func ImageCANN(m *Matrix, image string) string {
	for _, v := range m.Vendors.Ascend.ContainerImages.VLLMAscend {
		if trimNote(v.Image) == image {
			return v.CANN
		}
	}
	for _, re := range []*regexp.Regexp{cannBaseTag, cannInTag} {
		if s := re.FindStringSubmatch(image); s != nil {
			return s[1]
		}
	}
	return ""
}

func trimNote(s string) string {
	if i := strings.Index(s, " ("); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func ascendImageLink(m *Matrix, hws []hwMatch, rels []relMatch, c Chain) Link {
	if c.Image == "" {
		return notDeclared("image")
	}
	for _, r := range rels {
		for _, img := range r.rel.ContainerImages {
			if img == c.Image || strings.HasSuffix(c.Image, ":"+img) {
				return link("image", c.Image, Compatible, "published with driver "+c.Driver, r.rel.Source)
			}
		}
	}
	imgCANN := ImageCANN(m, c.Image)
	switch {
	case imgCANN == "":
		return link("image", c.Image, Unknown, "cannot read a CANN version from the image name", "")
	case c.CANN != "" && strings.EqualFold(imgCANN, c.CANN):
		return link("image", c.Image, Compatible, "carries CANN "+imgCANN+", as declared", "")
	case c.CANN != "":
		return link("image", c.Image, Incompatible, fmt.Sprintf("carries CANN %s, the chain declares CANN %s", imgCANN, c.CANN), "")
	}
	// No CANN declared: the image's own CANN must fit the driver.
	l := ascendCANNLink(m, hws, rels, c.Driver, imgCANN)
	l.Link, l.Value = "image", c.Image
	l.Reason = "carries CANN " + imgCANN + ": " + l.Reason
	return l
}

// ---- NVIDIA ----

// nvidiaGPU finds the GPU a model name means by its tokens: "A100-80G" and
// "NVIDIA-A100-SXM4-80GB" are A100; "A10-24G" is A10, not A100.
func nvidiaGPU(m *Matrix, name string) (*GPUProduct, bool) {
	tokens := strings.FieldsFunc(strings.ToUpper(name), func(r rune) bool {
		return (r < 'A' || r > 'Z') && (r < '0' || r > '9')
	})
	for i := range m.Vendors.NVIDIA.GPUProducts {
		g := &m.Vendors.NVIDIA.GPUProducts[i]
		for _, t := range tokens {
			if t == strings.ToUpper(g.Product) {
				return g, true
			}
		}
	}
	return nil, false
}

func checkNVIDIA(m *Matrix, c Chain) Result {
	res := Result{Vendor: VendorNVIDIA}
	gpu, gpuOK := nvidiaGPU(m, c.Hardware)
	minCUDA := ""
	switch {
	case c.Hardware == "":
		res.Links = append(res.Links, notDeclared("hardware"))
	case !gpuOK:
		res.Links = append(res.Links, link("hardware", c.Hardware, Unknown, "GPU model not in the matrix", ""))
	default:
		minCUDA = leadingVersion(gpu.MinCUDAToolkit)
		res.Links = append(res.Links, link("hardware", c.Hardware, Compatible, fmt.Sprintf("NVIDIA %s (%s, compute capability %s), needs CUDA >= %s",
			gpu.Product, gpu.Architecture, gpu.ComputeCapability, minCUDA), gpu.Source))
	}
	drv, drvOK := parseVersion(c.Driver)
	res.Links = append(res.Links, nvidiaDriverLink(m, c, drv, drvOK, minCUDA))
	res.Links = append(res.Links, nvidiaCUDALink(m, c, drv, drvOK, minCUDA))
	res.Links = append(res.Links, nvidiaPyTorchLink(m, c, drv, drvOK))
	res.Links = append(res.Links, nvidiaImageLink(c))
	return res
}

func cudaRow(m *Matrix, cuda string) (*CUDAMinDriver, bool) {
	mm := majorMinor(cuda)
	for i := range m.Vendors.NVIDIA.CUDAMinDriver {
		if m.Vendors.NVIDIA.CUDAMinDriver[i].CUDA == mm {
			return &m.Vendors.NVIDIA.CUDAMinDriver[i], true
		}
	}
	return nil, false
}

func nvidiaDriverLink(m *Matrix, c Chain, drv *version.Version, ok bool, minCUDA string) Link {
	if c.Driver == "" {
		return notDeclared("driver")
	}
	if !ok {
		return link("driver", c.Driver, Unknown, "not an NVIDIA driver version (want e.g. 535.104.05)", "")
	}
	if minCUDA != "" {
		if row, found := cudaRow(m, minCUDA); found {
			if need, _ := parseVersion(row.ToolkitDriverLinux); compareVersions(drv, need) < 0 {
				return link("driver", c.Driver, Incompatible, fmt.Sprintf("%s needs CUDA >= %s, which needs driver >= %s",
					c.Hardware, minCUDA, row.ToolkitDriverLinux), row.Source)
			}
		}
	}
	branch := fmt.Sprintf("R%d", drv.Major())
	for _, b := range m.Vendors.NVIDIA.DriverBranches {
		if b.Branch == branch {
			reason := "driver branch " + branch
			if b.Designation != "" {
				reason += " (" + b.Designation
				if b.EOL != "" {
					reason += ", EOL " + b.EOL
				}
				reason += ")"
			}
			return link("driver", c.Driver, Compatible, reason, b.Source)
		}
	}
	return link("driver", c.Driver, Unknown, "driver branch "+branch+" is not in the matrix", "")
}

func nvidiaCUDALink(m *Matrix, c Chain, drv *version.Version, drvOK bool, minCUDA string) Link {
	if c.CUDA == "" {
		return notDeclared("cuda")
	}
	row, ok := cudaRow(m, c.CUDA)
	if !ok {
		return link("cuda", c.CUDA, Unknown, "CUDA version not in the matrix", "")
	}
	if minCUDA != "" && compareVersionStrings(majorMinor(c.CUDA), minCUDA) < 0 {
		return link("cuda", c.CUDA, Incompatible, fmt.Sprintf("%s needs CUDA >= %s", c.Hardware, minCUDA), row.Source)
	}
	if !drvOK {
		return link("cuda", c.CUDA, Unknown, "no NVIDIA driver version to check CUDA against", row.Source)
	}
	full, _ := parseVersion(row.ToolkitDriverLinux)
	floor, _ := parseVersion(row.MinDriverLinux)
	switch {
	case compareVersions(drv, full) >= 0:
		return link("cuda", c.CUDA, Compatible, fmt.Sprintf("driver %s >= %s, every CUDA %s feature", c.Driver, row.ToolkitDriverLinux, row.CUDA), row.Source)
	case floor != nil && compareVersions(drv, floor) >= 0:
		return link("cuda", c.CUDA, Compatible, fmt.Sprintf("driver %s >= %s: minor-version compatibility, limited features (all features from %s)",
			c.Driver, row.MinDriverLinux, row.ToolkitDriverLinux), row.Source)
	}
	return link("cuda", c.CUDA, Incompatible, fmt.Sprintf("CUDA %s needs driver >= %s (all features: %s)",
		row.CUDA, row.MinDriverLinux, row.ToolkitDriverLinux), row.Source)
}

func nvidiaPyTorchLink(m *Matrix, c Chain, drv *version.Version, drvOK bool) Link {
	if c.PyTorch == "" {
		return notDeclared("pytorch")
	}
	var row *PyTorchCUDA
	for i := range m.Vendors.NVIDIA.PyTorchCUDABuilds {
		if m.Vendors.NVIDIA.PyTorchCUDABuilds[i].PyTorch == majorMinor(c.PyTorch) {
			row = &m.Vendors.NVIDIA.PyTorchCUDABuilds[i]
		}
	}
	if row == nil {
		return link("pytorch", c.PyTorch, Unknown, "PyTorch version not in the matrix", "")
	}
	var builds []string
	for _, b := range row.CUDABuilds {
		builds = append(builds, b.CUDA)
		if c.CUDA != "" && b.CUDA == majorMinor(c.CUDA) {
			return link("pytorch", c.PyTorch, Compatible, fmt.Sprintf("published as a %s build (%s)", b.WheelTag, b.Kind), row.Source)
		}
	}
	if c.CUDA != "" {
		return link("pytorch", c.PyTorch, Incompatible, fmt.Sprintf("PyTorch %s is built for CUDA %s, not %s",
			row.PyTorch, strings.Join(builds, ", "), c.CUDA), row.Source)
	}
	if !drvOK {
		return link("pytorch", c.PyTorch, Unknown, "no CUDA or driver declared to check PyTorch against", row.Source)
	}
	for _, b := range row.CUDABuilds {
		if r, ok := cudaRow(m, b.CUDA); ok {
			if need, _ := parseVersion(r.ToolkitDriverLinux); compareVersions(drv, need) >= 0 {
				return link("pytorch", c.PyTorch, Compatible, fmt.Sprintf("its %s build runs on driver %s", b.WheelTag, c.Driver), row.Source)
			}
		}
	}
	return link("pytorch", c.PyTorch, Incompatible, fmt.Sprintf("no CUDA build of PyTorch %s (%s) runs on driver %s with every feature",
		row.PyTorch, strings.Join(builds, ", "), c.Driver), row.Source)
}

var cudaInTag = regexp.MustCompile(`(?i)(?:cuda[-_]?(\d+\.\d+)|(?:^|[^a-z])cu(\d{3})(?:[^0-9]|$))`)

// ImageCUDA reads the CUDA version an image name carries ("...-cuda12.4-...", "cu124"), or "".
func ImageCUDA(image string) string {
	s := cudaInTag.FindStringSubmatch(image)
	switch {
	case s == nil:
		return ""
	case s[1] != "":
		return s[1]
	}
	// Wheel tags: cu118 is 11.8, cu124 is 12.4, cu130 is 13.0.
	return s[2][:2] + "." + s[2][2:]
}

func nvidiaImageLink(c Chain) Link {
	if c.Image == "" {
		return notDeclared("image")
	}
	cuda := ImageCUDA(c.Image)
	switch {
	case cuda == "":
		return link("image", c.Image, Unknown, "cannot read a CUDA version from the image name", "")
	case c.CUDA == "":
		return link("image", c.Image, Unknown, "carries CUDA "+cuda+"; no CUDA declared to check against", "")
	case majorMinor(cuda) == majorMinor(c.CUDA):
		return link("image", c.Image, Compatible, "carries CUDA "+cuda+", as declared", "")
	}
	return link("image", c.Image, Incompatible, fmt.Sprintf("carries CUDA %s, the chain declares CUDA %s", cuda, c.CUDA), "")
}

// ---- versions ----

// dottedNumbers is what a version is here: numbers joined by dots ("535.104.05").
var dottedNumbers = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*$`)

// parseVersion reads a dotted numeric version ("535.104.05", "12"); false when any part
// is not a number.
func parseVersion(s string) (*version.Version, bool) {
	s = strings.TrimSpace(s)
	if !dottedNumbers.MatchString(s) {
		return nil, false
	}
	if !strings.Contains(s, ".") {
		s += ".0" // util/version wants major.minor at least; "12" is 12.0
	}
	v, err := version.ParseGeneric(s)
	return v, err == nil
}

var zeroVersion = version.MajorMinor(0, 0)

// compareVersions orders two versions (-1, 0, 1); a version that did not parse (nil)
// counts as 0, so that any known version is above it.
func compareVersions(a, b *version.Version) int {
	if a == nil {
		a = zeroVersion
	}
	if b == nil {
		b = zeroVersion
	}
	switch {
	case a.LessThan(b):
		return -1
	case b.LessThan(a):
		return 1
	}
	return 0
}

func compareVersionStrings(a, b string) int {
	x, _ := parseVersion(a)
	y, _ := parseVersion(b)
	return compareVersions(x, y)
}

// majorMinor is "12.4" of "12.4.1".
func majorMinor(v string) string {
	parts := strings.SplitN(strings.TrimSpace(v), ".", 3)
	if len(parts) >= 2 {
		return parts[0] + "." + parts[1]
	}
	return v
}

// leadingVersion is "11.8" of "11.8 (INFERRED from cc 9.0; not stated for H200)".
func leadingVersion(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return ""
}

func dedupe(items []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range items {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
