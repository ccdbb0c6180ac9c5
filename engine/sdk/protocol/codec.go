package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Encode returns f as compact JSON plus '\n'. It refuses (bad_frame) a
// frame Decode would refuse, and (frame_too_large) one longer than
// MaxFrame, so the engine never sends what its peer must reject.
func Encode(f Frame) ([]byte, error) {
	if f == nil || (reflect.ValueOf(f).Kind() == reflect.Pointer && reflect.ValueOf(f).IsNil()) {
		return nil, badf("frame", "nil frame")
	}
	if err := f.check(); err != nil {
		return nil, err
	}
	b, err := encodeJSON(f.wire())
	if err != nil {
		return nil, badf(f.FrameType(), "%s", clip(err.Error(), 120))
	}
	if len(b) > MaxFrame {
		return nil, &Error{Code: CodeFrameTooLarge, Message: fmt.Sprintf(
			"%s frame: %d bytes, over the %d byte limit", f.FrameType(), len(b), MaxFrame)}
	}
	return b, nil
}

// encodeJSON is json.Marshal plus '\n' without HTML escaping: frames are
// never embedded in HTML, and \u003c only makes logs harder to read.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func marshal(f Frame) ([]byte, error) {
	b, err := encodeJSON(f.wire())
	if err != nil {
		return nil, err
	}
	return b[:len(b)-1], nil
}

// initialBuf is where a Reader's buffer starts; it doubles up to MaxFrame
// only for connections that actually send big frames.
const initialBuf = 4 << 10

// keepBuf is the largest buffer a Reader keeps between lines: one that grew
// past it for a big frame is let go as soon as that frame is used up, so a
// connection holds MaxFrame only while a big frame is in flight (64
// connections that each once sent 1 MiB would otherwise pin 64 MiB).
const keepBuf = 64 << 10

// Reader reads newline-terminated frames. It never holds more than
// MaxFrame bytes: a longer line fails with frame_too_large as soon as the
// limit is passed, without reading the rest of it. That error is final
// (the line has no end to resync on), so the caller should close the
// connection. A bad_frame error is not final: the next call reads the next
// line.
type Reader struct {
	r       io.Reader
	max     int // longest line, counting its '\n'
	buf     []byte
	start   int   // first unconsumed byte of buf
	end     int   // end of buffered data
	scanned int   // bytes after start known to hold no '\n'
	err     error // read error, returned once buffered lines are used up
}

// NewReader returns a Reader reading from r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r, max: MaxFrame} }

// NewReaderSize returns a Reader whose lines may be up to max bytes
// (counting the '\n') instead of MaxFrame: the control socket's replies,
// a page of receipts say, can be longer than any hook frame.
func NewReaderSize(r io.Reader, max int) *Reader { return &Reader{r: r, max: max} }

// ReadFrame reads and decodes the next frame. At a clean end of input it
// returns io.EOF; input ending inside a line returns io.ErrUnexpectedEOF
// and that partial line is never decoded.
func (r *Reader) ReadFrame() (Frame, error) {
	line, err := r.readLine()
	if err != nil {
		return nil, err
	}
	f, err := Decode(line)
	r.shrink()
	return f, err
}

// ReadLine returns a copy of the next line without its '\n', with the same
// errors as ReadFrame short of decoding.
func (r *Reader) ReadLine() ([]byte, error) {
	line, err := r.readLine()
	if err != nil {
		return nil, err
	}
	l := bytes.Clone(line[:len(line)-1])
	r.shrink()
	return l, nil
}

// shrink lets a big buffer go once nothing is buffered in it (the line
// just returned was the last one read); the next read starts small again.
// A buffer still holding the start of the next line is kept: it is that
// line's.
func (r *Reader) shrink() {
	if len(r.buf) > keepBuf && r.start == r.end {
		r.buf, r.start, r.end, r.scanned = nil, 0, 0, 0
	}
}

// Buffered reports whether a whole line is already read in, so that the
// next ReadFrame returns without waiting on the peer.
func (r *Reader) Buffered() bool {
	return bytes.IndexByte(r.buf[r.start+r.scanned:r.end], '\n') >= 0
}

// readLine returns the next line including '\n', valid until the next call.
func (r *Reader) readLine() ([]byte, error) {
	empty := 0
	for {
		if i := bytes.IndexByte(r.buf[r.start+r.scanned:r.end], '\n'); i >= 0 {
			line := r.buf[r.start : r.start+r.scanned+i+1]
			r.start += len(line)
			r.scanned = 0
			return line, nil
		}
		n := r.end - r.start
		r.scanned = n
		if n >= r.max { // even a '\n' next would make it max+1
			r.err = &Error{Code: CodeFrameTooLarge, Message: fmt.Sprintf(
				"line longer than %d bytes", r.max)}
			r.buf, r.start, r.end, r.scanned = nil, 0, 0, 0
		}
		if r.err != nil {
			if n > 0 && n < r.max {
				r.start, r.scanned = r.end, 0 // drop the partial line
				if r.err == io.EOF {
					return nil, io.ErrUnexpectedEOF
				}
			}
			return nil, r.err
		}
		if r.start > 0 { // slide the partial line to the front
			copy(r.buf, r.buf[r.start:r.end])
			r.start, r.end = 0, n
		}
		if r.end == len(r.buf) {
			nb := make([]byte, min(max(2*len(r.buf), initialBuf), r.max))
			copy(nb, r.buf[:r.end])
			r.buf = nb
		}
		m, err := r.r.Read(r.buf[r.end:])
		r.end += m
		switch {
		case err != nil:
			r.err = err
		case m == 0:
			if empty++; empty >= 100 {
				r.err = io.ErrNoProgress
			}
		}
	}
}

// Writer writes frames, one Write call per frame, and is safe for
// concurrent use so that replies from different calls never interleave.
// After a failed Write every later WriteFrame fails with the same error:
// a torn frame leaves the stream unusable.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteFrame encodes f and writes it. An encoding error writes nothing and
// leaves the Writer usable.
func (w *Writer) WriteFrame(f Frame) error {
	b, err := Encode(f)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	n, err := w.w.Write(b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	w.err = err
	return err
}

// WriteEncoded writes b, one or more whole frames as Encode returned them
// (concatenated), in one write: a batch of frames costs one system call,
// and no other frame of this Writer lands between them.
func (w *Writer) WriteEncoded(b []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	n, err := w.w.Write(b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	w.err = err
	return err
}

// EncodeLog is Encode(&Log{Level: level, Message: message}), the same
// bytes and the same errors, without reflection for the common frame: a
// valid level and a message that is valid UTF-8 and fits a frame however
// it escapes. A one-shot helper call (hookkit's SendLog) then never
// starts encoding/json, whose first use costs a short process more than
// the rest of the frame's work.
func EncodeLog(level, message string) ([]byte, error) {
	if !oneOf(level, levels) || !utf8.ValidString(message) || len(message) > maxPlainString {
		return Encode(&Log{Level: level, Message: message})
	}
	return AppendLog(nil, level, message), nil
}

// EncodeHello is Encode(&Hello{Protocol: Version, Token: token}), as
// EncodeLog is for a log frame.
func EncodeHello(token string) ([]byte, error) {
	if !utf8.ValidString(token) || len(token) > maxPlainString {
		return Encode(&Hello{Protocol: Version, Token: token})
	}
	return AppendHello(nil, token), nil
}

// IsContext reports whether line (a frame, with or without its '\n') is a
// context frame as Encode writes it, without decoding it: a caller that
// needs only to know that its hello was accepted (hookkit's SendLog)
// skips the decode. False says nothing: Decode the line to know.
func IsContext(line []byte) bool {
	return bytes.HasPrefix(line, []byte(`{"type":"context",`))
}

// maxPlainString is the longest string that fits a frame however it
// escapes: at most six bytes a byte (\u00XX), with room for the rest of
// a log or hello frame.
const maxPlainString = (MaxFrame - 64) / 6

// AppendLog appends the frame Encode gives for &Log{level, message} to
// dst, without reflection or an encoder per frame: a hook streaming lines
// (hookkit's LogLines) encodes one per line. level must be a valid level
// and message valid UTF-8; AppendLog checks neither (Encode does).
func AppendLog(dst []byte, level, message string) []byte {
	dst = append(dst, `{"type":"log","level":"`...)
	dst = append(dst, level...)
	dst = append(dst, `","message":`...)
	dst = appendString(dst, message)
	return append(dst, "}\n"...)
}

// AppendHello appends the frame Encode gives for &Hello{Version, token}
// to dst. A one-shot helper call (hookkit's SendLog) says hello without
// starting encoding/json, whose first use costs a process more than the
// rest of the frame's work. token must be valid UTF-8.
func AppendHello(dst []byte, token string) []byte {
	dst = append(dst, `{"type":"hello","protocol":`...)
	dst = strconv.AppendInt(dst, Version, 10)
	dst = append(dst, `,"token":`...)
	dst = appendString(dst, token)
	return append(dst, "}\n"...)
}

// appendString appends s as a JSON string, escaped as encoding/json does
// with HTML escaping off (encodeJSON): the C0 controls, quote, backslash
// and the line and paragraph separators. s must be valid UTF-8.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != '\u2028' && r != '\u2029' {
				i += size
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\u202`...)
			dst = append(dst, hex[r&0xf])
			i += size
			start = i
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
