package controller

import (
	"regexp"
	"slices"
	"strings"
)

// namesRegexp is a regular expression (RE2, as CEL's matches() runs it) whose
// language is exactly names: the names' longest common suffix once, and before it a
// trie of the rest in which siblings with the same subtree share one character class
// (gpu-node-0001…9999 becomes a few classes of digits, not 9,999 alternatives). It
// returns "" when Go's regexp (CEL's engine, in the API server too) refuses it.
func namesRegexp(names []string) string {
	re := namesPattern(names)
	if _, err := regexp.Compile(re); err != nil {
		return ""
	}
	return re
}

// namesPattern is namesRegexp's expression, not yet compiled.
func namesPattern(names []string) string {
	suffix := commonSuffix(names)
	root := &trieNode{}
	for _, n := range names {
		root.add(strings.TrimSuffix(n, suffix))
	}
	return "^(?:" + root.pattern() + ")" + regexp.QuoteMeta(suffix) + "$"
}

type trieNode struct {
	end      bool
	children map[byte]*trieNode
}

func (t *trieNode) add(s string) {
	for i := 0; i < len(s); i++ {
		if t.children == nil {
			t.children = map[byte]*trieNode{}
		}
		c, ok := t.children[s[i]]
		if !ok {
			c = &trieNode{}
			t.children[s[i]] = c
		}
		t = c
	}
	t.end = true
}

// pattern is the regular expression of the strings below t.
func (t *trieNode) pattern() string {
	// Children whose subtrees are the same language differ only in their first
	// character: one class followed by the subtree, in the order of that character.
	bySub := map[string][]byte{}
	for c, child := range t.children {
		sub := child.pattern()
		bySub[sub] = append(bySub[sub], c)
	}
	alts := make([]string, 0, len(bySub))
	for sub, chars := range bySub {
		slices.Sort(chars)
		alts = append(alts, charClass(chars)+sub)
	}
	slices.Sort(alts)
	switch {
	case len(alts) == 0:
		return ""
	case t.end:
		return "(?:" + strings.Join(alts, "|") + ")?"
	case len(alts) == 1:
		return alts[0]
	default:
		return "(?:" + strings.Join(alts, "|") + ")"
	}
}

// charClass matches one of chars (sorted): a single character escaped, else a class
// with runs of three or more as ranges.
func charClass(chars []byte) string {
	if len(chars) == 1 {
		return regexp.QuoteMeta(string(chars))
	}
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < len(chars); {
		j := i
		for j+1 < len(chars) && chars[j+1] == chars[j]+1 && isAlnum(chars[j+1]) && isAlnum(chars[i]) {
			j++
		}
		if j-i >= 2 {
			b.WriteString(classChar(chars[i]) + "-" + classChar(chars[j]))
		} else {
			for k := i; k <= j; k++ {
				b.WriteString(classChar(chars[k]))
			}
		}
		i = j + 1
	}
	b.WriteByte(']')
	return b.String()
}

func classChar(c byte) string {
	if isAlnum(c) {
		return string(c)
	}
	return `\` + string(c)
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func commonSuffix(names []string) string {
	if len(names) == 0 {
		return ""
	}
	s := names[0]
	for _, n := range names[1:] {
		for !strings.HasSuffix(n, s) {
			s = s[1:]
		}
	}
	return s
}
