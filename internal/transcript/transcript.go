// Package transcript reads the shell transcripts of a Markdown document and compares a
// command's output with what the document says it prints, so that a document whose
// example drifts from the code fails a test.
//
// A transcript is a fenced code block with lines that start with "$ ": each such line
// (with its continuation lines ending in "\") is a command, and the lines after it, up to
// the next command or a "# " comment line, are its output. Lines before the first command
// and "# " lines are prose. Other code blocks are left alone.
//
// Output is compared line by line, exactly, with three allowances for what no two runs
// print alike: a line "..." (indentation allowed) stands for any number of lines; table
// rows (fields separated by two or more spaces) compare field by field, so that column
// widths may differ; and the volatile fields below (an AGE column, a build's commit, Go
// and litepool versions, a quoted RFC 3339 time) are compared by shape only.
package transcript

import (
	"bufio"
	"fmt"
	"regexp"
	"strings"
)

// Command is one "$ " line of a document and the output the document shows for it.
type Command struct {
	Doc  string
	Line int // of the "$ " line, 1-based
	Text string
	Want []string
}

func (c Command) String() string { return fmt.Sprintf("%s:%d: $ %s", c.Doc, c.Line, c.Text) }

// Parse returns the commands of every transcript in a Markdown document, in order.
func Parse(doc, markdown string) []Command {
	var (
		cmds    []Command
		inBlock bool
		cur     *Command
		cont    bool
	)
	flush := func() {
		if cur != nil {
			cur.Want = trimTrailingBlank(cur.Want)
			cmds = append(cmds, *cur)
			cur = nil
		}
	}
	sc := bufio.NewScanner(strings.NewReader(markdown))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(strings.TrimSpace(line), "```"):
			flush()
			inBlock = !inBlock
		case !inBlock:
		case cont:
			cur.Text += "\n" + line
			cont = strings.HasSuffix(line, "\\")
		case strings.HasPrefix(line, "$ "):
			flush()
			cur = &Command{Doc: doc, Line: n, Text: strings.TrimPrefix(line, "$ ")}
			cont = strings.HasSuffix(line, "\\")
		case strings.HasPrefix(line, "# "):
			flush()
		case cur != nil:
			cur.Want = append(cur.Want, line)
		}
	}
	flush()
	return cmds
}

func trimTrailingBlank(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// Compare says how got (a command's output) differs from want, or "" when it matches.
func Compare(want []string, got string) string {
	gotLines := trimTrailingBlank(strings.Split(strings.TrimRight(got, "\n"), "\n"))
	if got == "" {
		gotLines = nil
	}
	w, g := normalize(want), normalize(gotLines)
	if match(w, g) {
		return ""
	}
	return fmt.Sprintf("the document shows:\n%s\nthe command printed:\n%s", indent(want), indent(gotLines))
}

func indent(lines []string) string {
	if len(lines) == 0 {
		return "    (nothing)"
	}
	return "    " + strings.Join(lines, "\n    ")
}

// match compares line by line; a want line "..." matches any run of lines.
func match(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if strings.TrimSpace(want[0]) == "..." {
		for i := 0; i <= len(got); i++ {
			if match(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && want[0] == got[0] && match(want[1:], got[1:])
}

var (
	columns  = regexp.MustCompile(`\S(?:\s?\S)*`)
	volatile = []struct {
		re   *regexp.Regexp
		with string
	}{
		{regexp.MustCompile(`commit [0-9a-f]{7,}(-dirty)?`), "commit <commit>"},
		{regexp.MustCompile(`go1\.\d+(\.\d+)?`), "<go>"},
		{regexp.MustCompile(`litepool v\d+\.\d+\.\d+\S*`), "litepool <version>"},
		{regexp.MustCompile(`"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"`), "<time>"},
	}
	age = regexp.MustCompile(`^\d+(s|m|h|d)(\d+(s|m|h))?$`)
)

// normalize makes each line comparable: volatile fields by shape, table rows as fields.
func normalize(lines []string) []string {
	out := make([]string, len(lines))
	ageCol := -1
	for i, l := range lines {
		for _, v := range volatile {
			l = v.re.ReplaceAllString(l, v.with)
		}
		if !strings.Contains(strings.TrimSpace(l), "  ") {
			out[i] = strings.TrimRight(l, " ")
			continue
		}
		fields := columns.FindAllString(l, -1)
		if idx := indexOf(fields, "AGE"); idx >= 0 {
			ageCol = idx
		} else if ageCol >= 0 && ageCol < len(fields) && age.MatchString(fields[ageCol]) {
			fields[ageCol] = "<age>"
		}
		out[i] = strings.Join(fields, " | ")
	}
	return out
}

func indexOf(fields []string, s string) int {
	for i, f := range fields {
		if f == s {
			return i
		}
	}
	return -1
}
