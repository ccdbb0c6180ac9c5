package hookcli

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// plainLog recognises the call shell hooks make by the hundred, `hook log
// [--level L] WORD...`, in the one shape whose meaning needs no parser:
// a known level given first, then words none of which starts with "-".
// Main sends it at once, without building the verb tree, whose help
// texts, closures and flag sets are a tenth of such a call's start.
// Anything else, a usage error included, is not plain and
// takes the parser, so what the helper answers is unchanged, which
// FuzzHelperArgvAsWarden holds it to.
func plainLog(argv []string) (level, msg string, ok bool) {
	if len(argv) < 3 || argv[0] != "hook" || argv[1] != "log" {
		return "", "", false
	}
	level, words := "info", argv[2:]
	switch {
	case words[0] == "--level" && len(words) > 1:
		level, words = words[1], words[2:]
	case strings.HasPrefix(words[0], "--level="):
		level, words = strings.TrimPrefix(words[0], "--level="), words[1:]
	}
	if len(words) == 0 || !slices.Contains(logLevels, level) {
		return "", "", false
	}
	for _, w := range words {
		if strings.HasPrefix(w, "-") {
			return "", "", false
		}
	}
	msg = strings.Join(words, " ")
	if !utf8.ValidString(msg) {
		return "", "", false
	}
	return level, msg, true
}
