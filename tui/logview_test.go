package tui

import (
	"strings"
	"testing"
	"time"
)

func TestLogViewSearchFar(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "flood", map[string]string{"lines": "seq -f 'line %g of 200000' 1 200000"}, nil)
	o := runHook(t, e, "flood", "lines")
	v := newLogView(testShared(e))
	v.width, v.height = 70, 10
	v.open(o.Run.ID)
	if v.end != 200000 || v.cursor != 199999 || !v.follow {
		t.Fatalf("open: end %d cursor %d follow %v", v.end, v.cursor, v.follow)
	}
	v.home()
	v.move(48)
	if v.cursor != 48 {
		t.Fatalf("cursor %d", v.cursor)
	}
	v.query = "line 150000 "
	if !v.search(1) {
		t.Fatal("no match")
	}
	if v.cursor != 149999 {
		t.Fatalf("cursor %d", v.cursor)
	}
	t.Logf("win %d..%d top %d", v.winStart(), v.winEnd(), v.top)
	view := v.View()
	t.Log("\n" + view)
	if !strings.Contains(view, "line 150001 of") {
		t.Errorf("the lines after the match are not shown")
	}
	if len(v.win) > winMax {
		t.Errorf("window holds %d lines", len(v.win))
	}
}

func TestLogViewFilterNoMatch(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "flood", map[string]string{"lines": "seq 1 200000; echo oops >&2; seq 1 10"}, nil)
	o := runHook(t, e, "flood", "lines")
	v := newLogView(testShared(e))
	v.width, v.height = 70, 10
	v.open(o.Run.ID)
	v.home()
	v.move(100000)
	start := time.Now()
	v.level = levelWarn
	v.refilter()
	t.Logf("refilter took %v; cursor %d", time.Since(start), v.cursor)
	if l, ok := v.selected(); !ok || l.Text != "oops" {
		t.Errorf("cursor %d on %q, want the one warning", v.cursor, l.Text)
	}
	if !strings.Contains(v.View(), "oops") {
		t.Errorf("view:\n%s", v.View())
	}
}
