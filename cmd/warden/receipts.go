package main

import (
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/tui"
)

func (a *app) receiptsCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "receipts",
		Short: "List, show and verify the hash-chained receipt log",
		Long: `Every action warden takes is recorded as a receipt in an append-only,
hash-chained log: hash = SHA-256(prev || canonical JSON of the receipt
without "hash"). Receipts carry names, never secret values.`,
	}
	var kind, since string
	var limit int
	var before uint64
	list := &cobra.Command{
		Use:   "list",
		Short: "List receipts, oldest first (the newest --limit matching)",
		Long: `Lists receipts oldest first: the newest --limit that match. The page
above is --before the first SEQ shown.`,
		Example: `  warden receipts list --kind secret.set
  warden receipts list --kind hook. --since 1h
  warden receipts list --before 1200 --limit 100
  warden receipts list --since 2026-11-29T00:00:00Z --limit 0 --json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return usageError{fmt.Errorf("--limit must be 0 (no limit) or more, got %d", limit)}
			}
			f := engine.ReceiptFilter{Kind: kind, Limit: limit, Before: before}
			if since != "" {
				t, err := parseSince(since)
				if err != nil {
					return usageError{err}
				}
				f.Since = t
			}
			return a.withEngine(func(e engine.Facade) error {
				rs, err := e.Receipts(f)
				if err != nil {
					return err
				}
				if a.json {
					if rs == nil {
						rs = []engine.Receipt{}
					}
					return a.emitJSON(rs)
				}
				if len(rs) == 0 {
					a.printf("no receipts match\n")
					return nil
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "SEQ\tTIME\tKIND\tACTOR\tSUBJECT\tSUMMARY")
				for _, r := range rs {
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", r.Seq, r.At.Local().Format("2006-01-02 15:04:05"), safe(r.Kind), safe(r.Actor), safe(r.Subject), oneLine(r.Summary, 80))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				if limit > 0 && len(rs) == limit && rs[0].Seq > 1 {
					a.printf("older: `warden receipts list --limit %d --before %d`\n", limit, rs[0].Seq)
				}
				return nil
			})
		},
	}
	list.Flags().StringVar(&kind, "kind", "", "only this kind (a trailing dot matches a family, e.g. hook.)")
	list.Flags().StringVar(&since, "since", "", "only receipts at or after this time (RFC 3339) or this long ago (e.g. 90m, 24h)")
	list.Flags().IntVar(&limit, "limit", 50, "at most this many, the newest (0 for all)")
	list.Flags().Uint64Var(&before, "before", 0, "only receipts with a lower SEQ (the page above)")

	show := &cobra.Command{
		Use:   "show SEQ",
		Short: "Show one receipt in full",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			seq, err := strconv.ParseUint(argv[0], 10, 64)
			if err != nil || seq == 0 {
				return usageError{fmt.Errorf("SEQ must be a positive number, got %q", argv[0])}
			}
			return a.withEngine(func(e engine.Facade) error {
				r, err := e.Receipt(seq)
				if err != nil {
					return err
				}
				if a.json {
					return a.emitJSON(r)
				}
				a.printf("seq      %d\nat       %s\nkind     %s\nactor    %s\nsubject  %s\nsummary  %s\n", r.Seq, r.At.Format(time.RFC3339Nano), safe(r.Kind), safe(r.Actor), safe(r.Subject), safe(r.Summary))
				if len(r.Details) > 0 {
					a.printf("details  %s\n", safe(string(r.Details)))
				}
				a.printf("prev     %s\nhash     %s\n", r.Prev, r.Hash)
				return nil
			})
		},
	}

	var full bool
	var from uint64
	verify := &cobra.Command{
		Use:   "verify",
		Short: "Check the chain from the newest checkpoint (--full: from the first receipt); exit 1 and name the first broken seq",
		Long: `Checks that every receipt decodes, follows the one before it (its prev is
that receipt's hash) and re-hashes to its own hash.

Every verify records a checkpoint (the hash it reached) every 10,000
receipts. By default verify starts at the newest checkpoint, so it costs
what was appended since; --since SEQ starts at the newest checkpoint at or
before SEQ; --full walks everything from the first receipt, and also
reports a checkpoint that no longer matches the log (it was rewritten).`,
		Example: `  warden receipts verify
  warden receipts verify --full
  warden receipts verify --since 120000 --json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if full && cmd.Flags().Changed("since") {
				return usageError{errors.New("give --full or --since, not both")}
			}
			return a.withEngine(func(e engine.Facade) error {
				var v engine.Verification
				var err error
				if full {
					v, err = e.VerifyReceipts()
				} else {
					v, err = e.VerifyReceiptsSince(from)
				}
				if err != nil {
					return err
				}
				switch {
				case a.json:
					a.emitJSON(v)
				case v.Intact && v.From > 0:
					a.printf("intact, %d receipts since the checkpoint at seq %d (--full re-checks all)\n", v.Count, v.From)
				case v.Intact:
					a.printf("intact, %d receipts\n", v.Count)
				default:
					a.printf("broken at seq %d: %s (the %d receipts before it are intact)\n", v.BrokenSeq, safe(v.Reason), v.BrokenSeq-1)
				}
				if !v.Intact {
					return &exitError{code: 1}
				}
				return nil
			})
		},
	}
	verify.Flags().BoolVar(&full, "full", false, "check every receipt from the first, not from the newest checkpoint")
	verify.Flags().Uint64Var(&from, "since", 0, "start at the newest checkpoint at or before this seq")
	c.AddCommand(list, show, verify)
	return c
}

func parseSince(s string) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("--since %q: a duration must be positive (how long ago)", s)
		}
		return time.Now().Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--since %q: want a time like 2026-11-29T14:00:00Z or 2026-11-29, or a duration like 90m", s)
}

// oneLine is tui.OneLine, escaped (safe) and cut to max runes with an
// ellipsis: a list column.
func oneLine(s string, max int) string {
	s = safe(tui.OneLine(s))
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}
