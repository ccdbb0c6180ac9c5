package protocol

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
)

const goodLog = `{"type":"log","level":"info","message":"ok"}` + "\n"

func TestReaderExactMaxFrame(t *testing.T) {
	big := logOfSize(t, MaxFrame)
	for name, src := range map[string]io.Reader{
		"bulk":     bytes.NewReader(append(append([]byte(goodLog), big...), goodLog...)),
		"one byte": iotest.OneByteReader(bytes.NewReader(append(append([]byte(goodLog), big...), goodLog...))),
	} {
		r := NewReader(src)
		for i, wantLen := range []int{len(`ok`), MaxFrame - len(`{"type":"log","level":"info","message":""}`+"\n"), len(`ok`)} {
			f, err := r.ReadFrame()
			if err != nil {
				t.Fatalf("%s: frame %d: %v", name, i, err)
			}
			if got := len(f.(*Log).Message); got != wantLen {
				t.Fatalf("%s: frame %d message is %d bytes, want %d", name, i, got, wantLen)
			}
		}
		if _, err := r.ReadFrame(); err != io.EOF {
			t.Fatalf("%s: after last frame: %v, want io.EOF", name, err)
		}
	}
}

func TestReaderLineTooLong(t *testing.T) {
	big := logOfSize(t, MaxFrame)
	over := append([]byte(`{"type":"log","level":"info","message":"x`), big[len(`{"type":"log","level":"info","message":"`):]...)
	if len(over) != MaxFrame+1 {
		t.Fatalf("test line is %d bytes", len(over))
	}
	r := NewReader(bytes.NewReader(append(over, goodLog...)))
	_, err := r.ReadFrame()
	if ErrorCode(err) != CodeFrameTooLarge {
		t.Fatalf("MaxFrame+1 line: %v, want frame_too_large", err)
	}
	// Final: the rest of the oversized line must not be read as a frame.
	if _, err := r.ReadFrame(); ErrorCode(err) != CodeFrameTooLarge {
		t.Fatalf("after frame_too_large: %v, want it again", err)
	}
	if _, err := r.ReadLine(); ErrorCode(err) != CodeFrameTooLarge {
		t.Fatalf("ReadLine after frame_too_large: %v, want it again", err)
	}
}

// endless yields 'a' bytes up to limit, counting what it hands out.
type endless struct{ n, limit int }

func (e *endless) Read(p []byte) (int, error) {
	if e.n >= e.limit {
		return 0, io.EOF
	}
	p = p[:min(len(p), e.limit-e.n)]
	for i := range p {
		p[i] = 'a'
	}
	e.n += len(p)
	return len(p), nil
}

func TestReaderBoundedMemory(t *testing.T) {
	src := &endless{limit: 50 << 20}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := NewReader(src).ReadLine()
	runtime.ReadMemStats(&after)
	if ErrorCode(err) != CodeFrameTooLarge {
		t.Fatalf("50 MiB line: %v, want frame_too_large", err)
	}
	if src.n > MaxFrame {
		t.Errorf("read %d bytes of the 50 MiB line, want at most MaxFrame (%d)", src.n, MaxFrame)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 3*MaxFrame {
		t.Errorf("allocated %d bytes for one oversized line, want at most %d", alloc, 3*MaxFrame)
	}
}

// A connection that sent one big frame does not keep a MaxFrame buffer
// while it is quiet: the buffer goes back to small once the frame is used.
func TestReaderReleasesBigBuffer(t *testing.T) {
	big := logOfSize(t, MaxFrame)
	pr, pw := io.Pipe()
	go func() {
		pw.Write(big)
		pw.Write([]byte(goodLog)) // after the big frame was read on its own
		pw.Close()
	}()
	r := NewReader(pr)
	for i, read := range []func() error{
		func() error { _, err := r.ReadFrame(); return err },
		func() error { _, err := r.ReadLine(); return err },
	} {
		if err := read(); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if len(r.buf) > keepBuf {
			t.Errorf("after frame %d the reader keeps a %d byte buffer, want at most %d", i, len(r.buf), keepBuf)
		}
	}
	// Big frames back to back, each written whole: each is still read
	// whole, whatever the buffer did in between.
	var in bytes.Buffer
	for range 3 {
		in.Write(big)
		in.WriteString(goodLog)
	}
	r = NewReader(&in)
	for i := range 6 {
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if l, ok := f.(*Log); !ok || (i%2 == 0) != (len(l.Message) > 1000) {
			t.Fatalf("frame %d: %T of the wrong size", i, f)
		}
	}
}

func TestReaderBadLineThenGood(t *testing.T) {
	in := "garbage\n" + `{"type":"log","level":"loud","message":"x"}` + "\n\n" + goodLog
	r := NewReader(strings.NewReader(in))
	for i, want := range []string{"not JSON", "unknown level", "empty"} {
		_, err := r.ReadFrame()
		if ErrorCode(err) != CodeBadFrame || !strings.Contains(err.Error(), want) {
			t.Fatalf("line %d: %v, want bad_frame %q", i, err, want)
		}
	}
	f, err := r.ReadFrame()
	if err != nil || f.(*Log).Message != "ok" {
		t.Fatalf("good line after bad ones: %#v, %v", f, err)
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("end: %v, want io.EOF", err)
	}
}

func TestReaderPartialLastLine(t *testing.T) {
	// A complete, valid frame that lost its newline: a hook killed
	// mid-write. It must never be decoded.
	in := goodLog + strings.TrimSuffix(goodLog, "\n")
	r := NewReader(iotest.HalfReader(strings.NewReader(in)))
	if _, err := r.ReadFrame(); err != nil {
		t.Fatalf("first frame: %v", err)
	}
	if f, err := r.ReadFrame(); err != io.ErrUnexpectedEOF {
		t.Fatalf("partial last line: %#v, %v; want io.ErrUnexpectedEOF", f, err)
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("after partial line: %v, want io.EOF", err)
	}
}

func TestReaderEOFAndErrors(t *testing.T) {
	if _, err := NewReader(strings.NewReader("")).ReadFrame(); err != io.EOF {
		t.Errorf("empty input: %v, want io.EOF", err)
	}
	// Lines delivered together with io.EOF are still returned.
	r := NewReader(iotest.DataErrReader(strings.NewReader(goodLog + goodLog)))
	for i := 0; i < 2; i++ {
		if _, err := r.ReadFrame(); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Errorf("end: %v, want io.EOF", err)
	}
	boom := errors.New("connection reset")
	r = NewReader(io.MultiReader(strings.NewReader(goodLog+`{"type"`), iotest.ErrReader(boom)))
	if _, err := r.ReadFrame(); err != nil {
		t.Fatalf("frame before error: %v", err)
	}
	if _, err := r.ReadFrame(); err != boom {
		t.Errorf("read error: %v, want %v", err, boom)
	}
	r = NewReader(iotest.ErrReader(nil)) // (0, nil) forever
	if _, err := r.ReadFrame(); err != io.ErrNoProgress {
		t.Errorf("reader making no progress: %v, want io.ErrNoProgress", err)
	}
}

func TestReadLineCopies(t *testing.T) {
	r := NewReader(strings.NewReader("first\nsecond\n"))
	a, err := r.ReadLine()
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.ReadLine()
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != "first" || string(b) != "second" {
		t.Errorf("ReadLine = %q, %q", a, b)
	}
}

// recorder keeps every Write call separately.
type recorder struct {
	mu     sync.Mutex
	writes [][]byte
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, bytes.Clone(p))
	return len(p), nil
}

func TestWriterConcurrent(t *testing.T) {
	rec := &recorder{}
	w := NewWriter(rec)
	const workers, each = 16, 200
	var wg sync.WaitGroup
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 1; i <= each; i++ {
				if err := w.WriteFrame(Return{ID: int64(g*each + i), Value: raw(`"` + strings.Repeat("v", i) + `"`)}); err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	if len(rec.writes) != workers*each {
		t.Fatalf("%d Write calls, want %d (one per frame)", len(rec.writes), workers*each)
	}
	ids := map[int64]bool{}
	for _, b := range rec.writes {
		f, err := Decode(b)
		if err != nil || bytes.Count(b, []byte("\n")) != 1 {
			t.Fatalf("write %q is not one whole frame: %v", b, err)
		}
		ids[f.(*Return).ID] = true
	}
	if len(ids) != workers*each {
		t.Errorf("%d distinct ids, want %d", len(ids), workers*each)
	}
}

type failWriter struct{ calls int }

func (f *failWriter) Write(p []byte) (int, error) {
	f.calls++
	return len(p) / 2, nil
}

func TestWriterErrors(t *testing.T) {
	fw := &failWriter{}
	w := NewWriter(fw)
	if err := w.WriteFrame(Log{Level: "loud"}); ErrorCode(err) != CodeBadFrame || fw.calls != 0 {
		t.Fatalf("bad frame: %v after %d writes, want bad_frame and no write", err, fw.calls)
	}
	if err := w.WriteFrame(Log{Level: "info"}); err != io.ErrShortWrite {
		t.Fatalf("short write: %v", err)
	}
	if err := w.WriteFrame(Log{Level: "info"}); err != io.ErrShortWrite || fw.calls != 1 {
		t.Fatalf("after a torn frame: %v after %d writes, want the same error and no new write", err, fw.calls)
	}
}

func BenchmarkDecodeStoreGet(b *testing.B) {
	line := []byte(`{"type":"store","id":8,"store":"secrets","method":"get","args":["bot_token"]}` + "\n")
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(line); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReaderLines(b *testing.B) {
	var in []byte
	for _, c := range wireCases {
		in = append(in, mustEncode(b, c.frame)...)
	}
	n := len(wireCases)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r := NewReader(bytes.NewReader(in))
		for i := 0; i < n; i++ {
			if _, err := r.ReadFrame(); err != nil {
				b.Fatal(err)
			}
		}
	}
}
