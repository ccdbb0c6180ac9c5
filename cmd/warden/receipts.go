package main

import (
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"warden/engine"
	"warden/tui"
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
	list := &cobra.Command{
		Use:   "list",
		Short: "List receipts, oldest first (the newest --limit matching)",
		Example: `  warden receipts list --kind secret.set
  warden receipts list --kind hook. --since 1h
  warden receipts list --since 2026-11-29T00:00:00Z --limit 0 --json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := engine.ReceiptFilter{Kind: kind, Limit: limit}
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
				return tw.Flush()
			})
		},
	}
	list.Flags().StringVar(&kind, "kind", "", "only this kind (a trailing dot matches a family, e.g. hook.)")
	list.Flags().StringVar(&since, "since", "", "only receipts at or after this time (RFC 3339) or this long ago (e.g. 90m, 24h)")
	list.Flags().IntVar(&limit, "limit", 50, "at most this many, the newest (0 for all)")

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

	verify := &cobra.Command{
		Use:   "verify",
		Short: "Walk the whole chain; exit 1 and name the first broken seq if it is broken",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withEngine(func(e engine.Facade) error {
				v, err := e.VerifyReceipts()
				if err != nil {
					return err
				}
				if a.json {
					a.emitJSON(v)
				} else if v.Intact {
					a.printf("intact, %d receipts\n", v.Count)
				} else {
					a.printf("broken at seq %d: %s (%d receipts before it are intact)\n", v.BrokenSeq, safe(v.Reason), v.Count)
				}
				if !v.Intact {
					return &exitError{code: 1}
				}
				return nil
			})
		},
	}
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
