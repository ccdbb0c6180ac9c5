package main

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeCodeBlocksEndBeforeProse: an indented code block is followed
// by a blank line, so prose never runs into it (it did: "    warden
// doctor Every" / "verb names its data dir…"), and the "build it
// yourself" block builds warden-hook beside warden, as doctor wants.
func TestReadmeCodeBlocksEndBeforeProse(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
	inFence := false
	for i := 1; i < len(lines); i++ {
		l, prev := lines[i], lines[i-1]
		if strings.HasPrefix(strings.TrimSpace(prev), "```") {
			inFence = !inFence
		}
		if inFence || strings.TrimSpace(l) == "" || strings.TrimSpace(prev) == "" {
			continue
		}
		// A code line (4+ spaces deeper than the text around it) followed
		// by a line less indented than the code, which is prose.
		if indent(prev) >= 4 && indent(l) < 4 && !strings.HasPrefix(strings.TrimSpace(l), "-") && !isCodeContinuation(lines, i-1) {
			t.Errorf("README.md line %d runs prose into the code block above it:\n%d: %s\n%d: %s", i+1, i, prev, i+1, l)
		}
	}
	text := string(b)
	at := strings.Index(text, "build it yourself")
	if at < 0 {
		t.Fatal(`README.md has no "build it yourself" block`)
	}
	// The block is the indented lines after the paragraph that says so.
	block := text[at:]
	if i := strings.Index(block, "\n\n"); i >= 0 {
		block = block[i+2:]
	}
	if i := strings.Index(block, "\n\n"); i >= 0 {
		block = block[:i]
	}
	if !strings.Contains(block, "./cmd/warden-hook") || !strings.Contains(block, "./cmd/warden ") {
		t.Errorf("the \"build it yourself\" block does not build warden and warden-hook:\n%s", block)
	}
}

// isCodeContinuation: the line at i is inside a list item's code (6+
// spaces), whose block the list's own rules end.
func isCodeContinuation(lines []string, i int) bool {
	for j := i; j >= 0 && strings.TrimSpace(lines[j]) != ""; j-- {
		if strings.HasPrefix(lines[j], "- ") || strings.HasPrefix(lines[j], "  ") && !strings.HasPrefix(lines[j], "    ") {
			return true
		}
	}
	return false
}
