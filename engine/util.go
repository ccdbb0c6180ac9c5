package engine

import (
	"bytes"
	"time"
)

func nowUTC() time.Time { return time.Now().UTC() }

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
