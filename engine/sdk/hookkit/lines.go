package hookkit

import (
	"bufio"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/wardenhq/warden/engine/sdk/protocol"
)

// MaxLogPiece is the longest piece of a line LogLines sends in one frame;
// a longer line is cut into pieces on a UTF-8 boundary. Even a piece
// that JSON escapes to six bytes a byte fits a frame.
const MaxLogPiece = 128 << 10

// batchBytes is how many encoded frames LogLines gathers into one write.
const batchBytes = 64 << 10

// LogLines sends every line read from r as a log frame at level, on this
// connection, until r ends; it returns how many frames it sent. Lines are
// what a hook's stdout gives the stream: "\n" and a trailing "\r"
// stripped, invalid UTF-8 as U+FFFD, a last line without "\n" still sent,
// an empty line kept.
//
// Frames go out in batches: the lines r has ready share one write, and
// what is gathered is written before LogLines waits on r again, so a slow
// producer's lines still arrive as they are made.
func (c *Client) LogLines(level string, r io.Reader) (int, error) {
	if _, err := protocol.Encode(&protocol.Log{Level: level}); err != nil {
		return 0, err // an unknown level
	}
	br := bufio.NewReaderSize(r, batchBytes)
	var batch []byte
	sent := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := c.w.WriteEncoded(batch)
		batch = batch[:0]
		return err
	}
	send := func(line []byte) error {
		for first := true; first || len(line) > 0; first = false {
			piece := line
			if len(piece) > MaxLogPiece {
				cut := MaxLogPiece
				for cut > 0 && !utf8.RuneStart(line[cut]) {
					cut--
				}
				piece = line[:cut]
			}
			line = line[len(piece):]
			msg := string(piece)
			if !utf8.ValidString(msg) {
				msg = strings.ToValidUTF8(msg, "\uFFFD")
			}
			// The level was checked above and msg is valid UTF-8; a
			// MaxLogPiece message fits a frame however it escapes.
			batch = protocol.AppendLog(batch, level, msg)
			sent++
			if len(batch) >= batchBytes {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return nil
	}
	var long []byte // a line longer than the read buffer, gathered
	for {
		if br.Buffered() == 0 {
			// About to wait for the producer: what it made so far goes now.
			if err := flush(); err != nil {
				return sent, err
			}
		}
		frag, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long, frag...)
			for len(long) > MaxLogPiece+utf8.UTFMax {
				cut := MaxLogPiece
				for cut > 0 && !utf8.RuneStart(long[cut]) {
					cut--
				}
				if serr := send(long[:cut]); serr != nil {
					return sent, serr
				}
				long = long[:copy(long, long[cut:])]
			}
			continue
		}
		line := frag
		if len(long) > 0 {
			line = append(long, frag...)
			long = long[:0]
		}
		if err == nil {
			line = line[:len(line)-1]
		}
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if err == nil || len(line) > 0 {
			if serr := send(line); serr != nil {
				return sent, serr
			}
		}
		if err != nil {
			if ferr := flush(); ferr != nil {
				return sent, ferr
			}
			if err == io.EOF {
				return sent, nil
			}
			return sent, err
		}
	}
}
