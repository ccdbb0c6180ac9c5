package hookcli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/wardenhq/warden/engine/sdk/hookkit"
	"github.com/wardenhq/warden/engine/sdk/protocol"
)

// The shell helper verbs of docs/protocol.md. They talk to the run's
// broker through hookkit (WARDEN_SOCKET, WARDEN_TOKEN) and never open a
// data dir: inside the jail there is none.

var errNotHook = errors.New("not running inside a warden hook (WARDEN_SOCKET/WARDEN_TOKEN unset)")

var logLevels = []string{"debug", "info", "warn", "error", "success"}

// withHook connects to the run's broker, runs fn and closes the
// connection. Close reports a failure the engine sent outside a call (for
// instance a log frame answered run_ended), so it counts too.
func (a *cli) withHook(fn func(c *hookkit.Client) error) error {
	// A helper's errors go to stderr as plain text even under --json: its
	// stdout is the value the hook script captures.
	*a.JSON = false
	c, err := hookkit.Connect()
	if err != nil {
		return hookErr(err)
	}
	err = fn(c)
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	return hookErr(err)
}

// hookErr maps a hookkit failure to the helper exit codes.
func hookErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, hookkit.ErrNoEngine):
		return usageError{errNotHook}
	case IsUsage(err):
		return err
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return err
	}
	var he *hookkit.Error
	if errors.As(err, &he) {
		return &ExitError{Code: 1, Err: he} // prints "warden: <code>: <message>"
	}
	return &ExitError{Code: 1, Err: err}
}

// writeJSON prints one JSON value and a newline, without HTML escaping.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printRaw prints a JSON value as compact JSON and a newline.
func printRaw(w io.Writer, v json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, v); err != nil {
		buf.Reset()
		buf.Write(v)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// parseJSONArg decodes a JSON command-line argument strictly: valid UTF-8,
// one value, of the given kind ('[' array or '{' object).
func parseJSONArg(what, s string, kind byte, into any) error {
	t := strings.TrimSpace(s)
	want := map[byte]string{'[': "a JSON array", '{': "a JSON object"}[kind]
	if !utf8.ValidString(s) {
		return usageError{fmt.Errorf("%s is not valid UTF-8", what)}
	}
	if !json.Valid([]byte(t)) {
		return usageError{fmt.Errorf("%s is not valid JSON (want %s, e.g. %s): %s", what, want, map[byte]string{'[': `'["Reboot now?"]'`, '{': `'{"address":"203.0.113.7"}'`}[kind], clipArg(s))}
	}
	if t[0] != kind {
		return usageError{fmt.Errorf("%s must be %s, got %s", what, want, clipArg(t))}
	}
	if err := json.Unmarshal([]byte(t), into); err != nil {
		return usageError{fmt.Errorf("%s: %v", what, err)}
	}
	return nil
}

func clipArg(s string) string {
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return fmt.Sprintf("%q", s)
}

func (a *cli) hookContextCommand() *Command {
	var asJSON bool
	c := &Command{
		Use:   "context [KEY]",
		Short: "Print the run's context (inputs, config, declared names, capabilities) as JSON",
		Long: `context prints the run's context as one line of JSON: run, module, hook,
inputs, config, declared secret and config names, and capabilities.

With KEY (a dotted path such as inputs.target) it prints just that value:
a string as plain text, anything else as JSON; nothing when it is absent
(or null with --json). That saves a shell hook from parsing JSON.`,
		Example: `  warden hook context
  target=$(warden hook context inputs.target)
  warden hook context capabilities --json`,
		Args: maxArgs(1),
		Run: func(argv []string) error {
			return a.withHook(func(c *hookkit.Client) error {
				b, err := protocol.Encode(c.Context())
				if err != nil {
					return err
				}
				b = bytes.TrimSuffix(b, []byte("\n"))
				if len(argv) == 0 {
					_, err := fmt.Fprintf(a.Stdout, "%s\n", b)
					return err
				}
				v, ok := lookupKey(b, argv[0])
				switch {
				case !ok && asJSON:
					_, err = fmt.Fprintln(a.Stdout, "null")
				case !ok:
				case asJSON:
					err = printRaw(a.Stdout, v)
				default:
					err = printValue(a.Stdout, v)
				}
				return err
			})
		},
	}
	c.Flags = []Flag{{Name: "json", Bool: &asJSON, Usage: "print KEY's value as JSON (strings quoted, null when absent)"}}
	return c
}

// lookupKey walks a dotted path through a JSON object.
func lookupKey(doc []byte, key string) (json.RawMessage, bool) {
	cur := json.RawMessage(doc)
	for _, part := range strings.Split(key, ".") {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(cur, &m); err != nil || m == nil {
			return nil, false
		}
		v, ok := m[part]
		if !ok {
			return nil, false
		}
		cur = v
	}
	if string(cur) == "null" {
		return nil, false
	}
	return cur, true
}

// printValue prints a JSON string as plain text and anything else as JSON.
func printValue(w io.Writer, v json.RawMessage) error {
	var s string
	if len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil {
		_, err := fmt.Fprintln(w, s)
		return err
	}
	return printRaw(w, v)
}

func (a *cli) hookLogCommand() *Command {
	level, fromStdin := "info", false
	c := &Command{
		Use:   "log [--level L] (MSG... | --stdin)",
		Short: "Add a line to the run's stream (levels: debug, info, warn, error, success)",
		Long: `log sends one stream line to the engine; the operator sees it live and it
is kept with the run. The words of MSG are joined with spaces.

With --stdin it sends every line of its stdin instead, one stream line
each, over one connection, until stdin ends: one process for a whole
stream (` + "`producer | warden hook log --stdin`" + `), not one per line. Lines are
taken as from stdout (a trailing \r dropped, invalid UTF-8 as U+FFFD, a
very long line cut into pieces).

Plain stdout and stderr lines are stream lines too (info and warn); log
adds the other levels and never mixes with output a script captures.`,
		Example: `  warden hook log "fetching the release"
  warden hook log --level success "installed $version"
  warden hook log --level warn disk is almost full
  apt-get -q install -y nginx 2>&1 | warden hook log --stdin --level debug`,
		Args: func(argv []string) error {
			if fromStdin {
				if len(argv) > 0 {
					return fmt.Errorf("--stdin takes no MSG (got %d words)", len(argv))
				}
				return nil
			}
			return minArgs(1)(argv)
		},
		Run: func(argv []string) error {
			if !slices.Contains(logLevels, level) {
				return usageError{fmt.Errorf("--level %q: want one of %s", level, strings.Join(logLevels, ", "))}
			}
			if fromStdin {
				return a.withHook(func(c *hookkit.Client) error {
					_, err := c.LogLines(level, a.Stdin)
					return err
				})
			}
			msg := strings.Join(argv, " ")
			if !utf8.ValidString(msg) {
				return usageError{errors.New("the message is not valid UTF-8")}
			}
			// Hello and the line in one write: one round trip.
			*a.JSON = false // as withHook: errors go to stderr as text
			return hookErr(hookkit.SendLog(level, msg))
		},
	}
	c.Flags = []Flag{
		{Name: "level", String: &level, Usage: "debug, info, warn, error or success"},
		{Name: "stdin", Bool: &fromStdin, Usage: "send each line of stdin as a stream line, over one connection"},
	}
	return c
}

// hookStoreCommand builds `secret` or `config` with get, set and delete.
func (a *cli) hookStoreCommand(verb, store, example string) *Command {
	open := func(c *hookkit.Client) *hookkit.Store {
		if store == "secrets" {
			return c.Secrets()
		}
		return c.Config()
	}
	noun, rule := "secret", "Only the names the module declares under `secrets:` may be read or written."
	if store == "config" {
		noun, rule = "config value", "Any of the module's config may be read; only the names it declares\nunder `config:` may be written."
	}
	// Plain concatenation, not fmt: every call of the helper builds these.
	c := &Command{
		Use:   verb,
		Short: "Get, set or delete the module's " + noun + "s",
		Long: verb + " get|set|delete reads and writes the module's " + noun + "s through the engine.\n" +
			rule + " Writes land at once and are receipted (names only, never values).",
	}

	var asJSON bool
	get := &Command{
		Use:   "get NAME",
		Short: "Print a " + noun + " (nothing when it is not set)",
		Long: "get prints the " + noun + " followed by a newline, or nothing when it is not set.\n" +
			"With --json it prints the JSON value instead: a quoted string, or null.",
		Example: "  value=$(warden hook " + verb + " get " + example + ")\n" +
			"  warden hook " + verb + " get " + example + ` --json     # "..." or null`,
		Args: exactArgs(1),
		Run: func(argv []string) error {
			return a.withHook(func(c *hookkit.Client) error {
				v, ok, err := open(c).Get(argv[0])
				if err != nil {
					return err
				}
				switch {
				case asJSON && !ok:
					_, err = fmt.Fprintln(a.Stdout, "null")
				case asJSON:
					err = writeJSON(a.Stdout, v)
				case ok:
					_, err = fmt.Fprintln(a.Stdout, v)
				}
				return err
			})
		},
	}
	get.Flags = []Flag{{Name: "json", Bool: &asJSON, Usage: "print the JSON value (a string, or null when not set)"}}

	set := &Command{
		Use:   "set NAME VALUE|-",
		Short: "Set a " + noun + "; - reads the value from stdin",
		Long: "set stores the " + noun + `; it lands at once. With - as VALUE the value is read
from stdin and one trailing newline is dropped, which keeps it out of the
process list.`,
		Example: "  warden hook " + verb + " set " + example + ` "$value"` + "\n" +
			"  head -c16 /dev/urandom | od -An -tx1 | tr -d ' \\n' | warden hook " + verb + " set " + example + " -",
		Args: exactArgs(2),
		Run: func(argv []string) error {
			value := argv[1]
			if value == "-" {
				var err error
				if value, err = a.readStdinValue(); err != nil {
					return err
				}
			}
			if !utf8.ValidString(value) {
				return usageError{errors.New("the value is not valid UTF-8")}
			}
			return a.withHook(func(c *hookkit.Client) error {
				return open(c).Set(argv[0], value)
			})
		},
	}

	del := &Command{
		Use:     "delete NAME",
		Short:   "Delete a " + noun + " (deleting one that is not set is fine)",
		Example: "  warden hook " + verb + " delete " + example,
		Args:    exactArgs(1),
		Run: func(argv []string) error {
			return a.withHook(func(c *hookkit.Client) error {
				return open(c).Delete(argv[0])
			})
		},
	}
	c.Subs = []*Command{get, set, del}
	return c
}

// readStdinValue reads a value from stdin, dropping one trailing newline.
func (a *cli) readStdinValue() (string, error) {
	b, err := io.ReadAll(io.LimitReader(a.Stdin, protocol.MaxFrame+1))
	if err != nil {
		return "", &ExitError{Code: 1, Err: fmt.Errorf("reading the value from stdin: %w", err)}
	}
	if len(b) > protocol.MaxFrame {
		return "", usageError{fmt.Errorf("the value on stdin is larger than %d bytes", protocol.MaxFrame)}
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	return string(b), nil
}

func (a *cli) hookCallCommand() *Command {
	c := &Command{
		Use:   "call CAP METHOD [JSON_ARGS]",
		Short: "Call a capability method and print the JSON value it returns",
		Long: `call invokes CAP.METHOD with JSON_ARGS, a JSON array (default []), and
prints the returned JSON value. The run's context lists the capabilities
the hook may call; operator.confirm is always there.

operator.confirm asks the operator a yes/no question and prints true or
false; while it waits, the hook's idle clock is paused.`,
		Example: `  warden hook call operator confirm '["Reboot now?"]'
  if [ "$(warden hook call operator confirm '["Wipe the cache?"]')" = true ]; then ...; fi
  warden hook call hands exec '["web", ["uname", "-a"]]'`,
		Args: rangeArgs(2, 3),
		Run: func(argv []string) error {
			var callArgs []json.RawMessage
			if len(argv) == 3 {
				if err := parseJSONArg("JSON_ARGS", argv[2], '[', &callArgs); err != nil {
					return err
				}
			}
			anyArgs := make([]any, len(callArgs))
			for i, v := range callArgs {
				anyArgs[i] = v
			}
			return a.withHook(func(c *hookkit.Client) error {
				v, err := c.Call(argv[0], argv[1], anyArgs...)
				if err != nil {
					return err
				}
				return printRaw(a.Stdout, v)
			})
		},
	}
	return c
}

// hook confirm's exit codes. A "no" must not look like success to a
// shell `if`, and an engine failure must not look like a "no" the
// operator gave: a script that cares (for instance to retry later) can
// tell them apart.
const (
	confirmNo     = 1
	confirmFailed = 3
)

func (a *cli) hookConfirmCommand() *Command {
	c := &Command{
		Use:   "confirm QUESTION",
		Short: "Ask the operator a yes/no question; the exit status is the answer",
		Long: `confirm asks the operator QUESTION (operator.confirm) and waits for the
answer; while it waits, the hook's idle clock is paused. The exit status
is the answer, so it reads naturally in a shell if:

  0  the operator said yes
  1  no: the operator said no, or the engine answered no for them (the
     request expired, no operator was attached, or a policy refused it;
     the run's stream says which)
  2  usage (no QUESTION, or not running inside a hook)
  3  no answer at all: the engine threw (the run ended, storage failed,
     the broker could not be reached); stderr says why

Nothing is printed on stdout unless --json, which prints {"confirmed":
true|false} on a yes or a no. (` + "`warden hook call operator confirm`" + ` prints
true or false and exits 0 either way: do not use it in an if.)`,
		Example: `  if warden hook confirm "Store the token?"; then store_it; fi
  warden hook confirm "Reboot now?" || exit 0
  warden hook confirm "Wipe the cache?"; case $? in 0) wipe;; 1) echo kept;; *) exit 1;; esac`,
		Args: exactArgs(1),
		Run: func(argv []string) error {
			asJSON := *a.JSON // withHook turns --json off for errors
			var yes bool
			err := a.withHook(func(c *hookkit.Client) error {
				v, err := c.Call("operator", "confirm", argv[0])
				if err != nil {
					return err
				}
				if err := json.Unmarshal(v, &yes); err != nil {
					return fmt.Errorf("operator.confirm answered %s, not true or false", v)
				}
				return nil
			})
			if err != nil {
				return confirmErr(err)
			}
			if asJSON {
				if err := writeJSON(a.Stdout, map[string]bool{"confirmed": yes}); err != nil {
					return &ExitError{Code: confirmFailed, Err: err}
				}
			}
			if !yes {
				return &ExitError{Code: confirmNo} // silent: the "no" is the status
			}
			return nil
		},
	}
	return c
}

// confirmErr keeps usage at 2 and moves every other failure from 1 to
// confirmFailed, since 1 is the operator's "no".
func confirmErr(err error) error {
	var ee *ExitError
	if errors.As(err, &ee) && ee.Code == 1 {
		return &ExitError{Code: confirmFailed, Err: ee.Err}
	}
	return err
}

func (a *cli) hookResultCommand() *Command {
	c := &Command{
		Use:   "result JSON",
		Short: "Set the run's outputs (a JSON object; once per run)",
		Long: `result sends the run's outputs, a JSON object, and waits for the engine to
check them against the outputs the manifest declares. A run has at most
one result; a refused result (wrong names or types) exits 1 and may be
sent again, fixed.`,
		Example: `  warden hook result '{"address":"203.0.113.7"}'
  warden hook result "{\"greeting\":\"Hello, $target\",\"confirmed\":true}"`,
		Args: exactArgs(1),
		Run: func(argv []string) error {
			var outputs map[string]json.RawMessage
			if err := parseJSONArg("the result", argv[0], '{', &outputs); err != nil {
				return err
			}
			out := make(map[string]any, len(outputs))
			for k, v := range outputs {
				out[k] = v
			}
			return a.withHook(func(c *hookkit.Client) error {
				return c.Result(out)
			})
		},
	}
	return c
}
