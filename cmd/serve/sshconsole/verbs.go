package sshconsole

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/charmbracelet/ssh"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/termsafe"
)

// `ssh host VERB…` runs one of warden's read-only verbs with the key's
// role (any key in the operators file may read) and prints what the CLI
// verb would, in short. Anything else is refused with a usage line and
// exit status 2: nothing that changes state runs this way (the console,
// `ssh -t host`, is where an operator acts).

// verbUsage is the line a refused command gets.
const verbUsage = "usage: ssh HOST [perms list [--all] | hook runs [--limit N] | receipts list [--limit N] [--kind K]] (no command: the console)"

// runVerb answers a session that named a command; false when it named
// none.
func (s *Server) runVerb(sess ssh.Session) bool {
	args := sess.Command()
	if len(args) == 0 {
		return false
	}
	out, code := verb(s.e, args)
	io.WriteString(sess, termsafe.Text(out))
	sess.Exit(code)
	return true
}

// verb runs args and returns its output and exit status.
func verb(e engine.Host, args []string) (string, int) {
	if len(args) < 2 {
		return fmt.Sprintf("warden: %q is not a read-only verb served over ssh\n%s\n", strings.Join(args, " "), verbUsage), 2
	}
	fs := flag.NewFlagSet(args[0]+" "+args[1], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	all := fs.Bool("all", false, "decided requests too")
	limit := fs.Int("limit", 20, "at most this many")
	kind := fs.String("kind", "", "receipt kind or family")
	var b strings.Builder
	name := args[0] + " " + args[1]
	switch name {
	case "perms list", "hook runs", "receipts list":
	default:
		return fmt.Sprintf("warden: %q is not a read-only verb served over ssh\n%s\n", name, verbUsage), 2
	}
	if err := fs.Parse(args[2:]); err != nil || fs.NArg() > 0 {
		return fmt.Sprintf("warden %s: bad arguments %q\n%s\n", name, strings.Join(args[2:], " "), verbUsage), 2
	}
	switch name {
	case "perms list":
		reqs, err := e.Requests(engine.RequestFilter{All: *all, Limit: *limit})
		if err != nil {
			return "warden perms list: " + err.Error() + "\n", 1
		}
		if len(reqs) == 0 {
			return "No pending permission requests.\n", 0
		}
		for _, r := range reqs {
			state := "pending"
			if r.Decision != nil {
				state = r.Decision.Verdict + " by " + r.Decision.By
			}
			fmt.Fprintf(&b, "#%-4d %-28s %-24s %s/%s %s\n", r.ID, safe(state), safe(r.Subject), safe(r.Requester.Module), safe(r.Requester.Hook), safe(engine.RequestSummary(r)))
		}
	case "hook runs":
		runs, err := e.Runs(*limit)
		if err != nil {
			return "warden hook runs: " + err.Error() + "\n", 1
		}
		if len(runs) == 0 {
			return "No runs yet.\n", 0
		}
		for _, r := range runs {
			fmt.Fprintf(&b, "%s  %-24s %-10s %s  by %s\n", safe(r.ID), safe(r.Module+"/"+r.Hook), safe(r.Status), r.Started.Local().Format("2006-01-02 15:04:05"), safe(r.Actor))
		}
	case "receipts list":
		k := *kind
		if k != "" && !strings.Contains(k, ".") {
			k += "."
		}
		rs, err := e.Receipts(engine.ReceiptFilter{Kind: k, Limit: *limit})
		if err != nil {
			return "warden receipts list: " + err.Error() + "\n", 1
		}
		for _, r := range rs {
			fmt.Fprintf(&b, "%6d %s %-16s %-24s %-20s %s\n", r.Seq, r.At.Local().Format("2006-01-02 15:04:05"), safe(r.Kind), safe(r.Actor), safe(r.Subject), safe(r.Summary))
		}
	}
	return b.String(), 0
}
