package storage

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// scanStream stores n lines in chunks of 100: every 10th a warn, every
// 100th an error reading "Disk FULL".
func scanStream(t testing.TB, s *Store, run string, n int) {
	t.Helper()
	at := time.Unix(1_700_000_000, 0)
	for lo := 0; lo < n; lo += 1000 {
		var lines []Line
		for i := lo; i < min(lo+1000, n); i++ {
			l := Line{At: at, Level: LevelInfo, Text: fmt.Sprintf("line %d: all good", i)}
			switch {
			case i%100 == 99:
				l.Level, l.Text = LevelError, fmt.Sprintf("line %d: Disk FULL", i)
			case i%10 == 9:
				l.Level = LevelWarn
			}
			lines = append(lines, l)
		}
		if _, err := s.Update(func(tx *Tx) error {
			for k := 0; k < len(lines); k += 100 {
				if _, _, err := tx.AppendLines(run, lines[k:min(k+100, len(lines))], 0); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

func nums(ls []Line) string {
	var b []string
	for _, l := range ls {
		b = append(b, fmt.Sprint(l.N))
	}
	return strings.Join(b, ",")
}

// TestScanLinesMatchesReadLines: a scan returns exactly the lines a read
// of the whole stream and a filter would, forward and backward, within
// its bounds, and says where to go on.
func TestScanLinesMatchesReadLines(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	run := "20261201T092818-e3a1f0"
	scanStream(t, s, run, 1050)
	scan := func(from uint64, back bool, f LineFilter, max, n int) (out LineScan) {
		t.Helper()
		if err := s.View(func(tx *Tx) (err error) { out, err = tx.ScanLines(run, from, back, f, max, n); return }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	errs := LineFilter{Levels: LevelBit(LevelError)}
	if got := scan(0, false, errs, 0, 0); len(got.Lines) != 10 || !got.Done || got.Lines[0].Text != "line 99: Disk FULL" || got.Next != 1050 {
		t.Errorf("forward, every error: %d lines, done %v, next %d, first %+v", len(got.Lines), got.Done, got.Next, got.Lines)
	}
	if got := scan(1050, true, errs, 3, 0); nums(got.Lines) != "799,899,999" || got.Done || got.Next != 700 {
		t.Errorf("backward, the newest 3 errors: %s (done %v, next %d)", nums(got.Lines), got.Done, got.Next)
	}
	if got := scan(799, true, errs, 3, 0); nums(got.Lines) != "499,599,699" {
		t.Errorf("backward, going on: %s", nums(got.Lines))
	}
	// Search: smart case (a lower-case query folds), with a level filter.
	if got := scan(0, false, LineFilter{Query: "disk full", Fold: true}, 2, 0); nums(got.Lines) != "99,199" || got.Next != 200 {
		t.Errorf("folded search: %s next %d", nums(got.Lines), got.Next)
	}
	if got := scan(0, false, LineFilter{Query: "disk full"}, 0, 0); len(got.Lines) != 0 || !got.Done {
		t.Errorf("a case-sensitive query found %s", nums(got.Lines))
	}
	if got := scan(0, false, LineFilter{Query: "line 5", Levels: LevelBit(LevelWarn)}, 0, 0); nums(got.Lines) != "59,509,519,529,539,549,559,569,579,589" {
		t.Errorf("query and level: %s", nums(got.Lines))
	}
	// Bounded: a scan of 250 lines stops, and says where to go on.
	if got := scan(0, false, errs, 0, 250); got.Done || got.Next != 250 || nums(got.Lines) != "99,199" {
		t.Errorf("bounded scan: %s next %d done %v", nums(got.Lines), got.Next, got.Done)
	}
	// Against the plain read, every level combination.
	var all []Line
	s.View(func(tx *Tx) (err error) { all, err = tx.ReadLines(run, 0, 0); return })
	for bits := uint8(0); bits < 64; bits += 2 {
		var want []Line
		for _, l := range all {
			if bits == 0 || bits&LevelBit(l.Level) != 0 {
				want = append(want, l)
			}
		}
		if got := scan(0, false, LineFilter{Levels: bits}, 0, 0); nums(got.Lines) != nums(want) {
			t.Errorf("levels %08b forward: %d lines, want %d", bits, len(got.Lines), len(want))
		}
		if got := scan(1050, true, LineFilter{Levels: bits}, 0, 0); nums(got.Lines) != nums(want) || !got.Done {
			t.Errorf("levels %08b backward: %d lines, want %d", bits, len(got.Lines), len(want))
		}
	}
}

func TestContainsFold(t *testing.T) {
	for _, tc := range []struct {
		text, q string
		want    bool
	}{
		{"Disk FULL", "disk full", true}, {"xxDISKx", "disk", true}, {"dis", "disk", false},
		{"ÉTÉ chaud", "été", true}, {"", "a", false}, {"aAaB", "ab", true},
		{"LINE 17: x", "line 17: ", true}, {"line 170: x", "line 17: ", false}, {"a:b:C", ":c", true},
		{"x1", "x1", true}, {"1x", "x1", false}, {"ab 12", "b 1", true},
	} {
		if got := containsFold([]byte(tc.text), tc.q); got != tc.want {
			t.Errorf("containsFold(%q, %q) = %v", tc.text, tc.q, got)
		}
	}
}

// TestScanLinesBoundsItsBytes: a reply holds at most ScanBytes of text
// (one line whatever its size), and says where to go on.
func TestScanLinesBoundsItsBytes(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	run := "20261201T092818-e3a1f0"
	big := strings.Repeat("x", MaxLineBytes)
	if _, err := s.Update(func(tx *Tx) error {
		for range 6 {
			if _, _, err := tx.AppendLines(run, []Line{{At: time.Unix(1, 0), Level: LevelInfo, Text: big}}, 0); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var fw, bw LineScan
	s.View(func(tx *Tx) (err error) {
		if fw, err = tx.ScanLines(run, 0, false, LineFilter{}, 0, 0); err != nil {
			return err
		}
		bw, err = tx.ScanLines(run, 6, true, LineFilter{}, 0, 0)
		return err
	})
	if nums(fw.Lines) != "0,1,2,3" || fw.Next != 4 || fw.Done {
		t.Errorf("forward: %s next %d done %v", nums(fw.Lines), fw.Next, fw.Done)
	}
	if nums(bw.Lines) != "2,3,4,5" || bw.Next != 2 || bw.Done {
		t.Errorf("backward: %s next %d done %v", nums(bw.Lines), bw.Next, bw.Done)
	}
}

// containsFold reports whether text holds the lower-case q, ignoring case.
func containsFold(text []byte, q string) bool {
	f := LineFilter{Query: q, Fold: true}
	return newMatcher(&f).pass(LevelInfo, text)
}
