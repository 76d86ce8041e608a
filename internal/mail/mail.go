// Package mail is an e-mail message as the service sends it, and the
// local stack's mailbox: each message a file under the stack's state
// directory (.paydev/mail/), where a developer opens it and a test reads
// the link it carries. Amazon SES delivers on AWS (the adapter is in
// internal/wire/dashboardwire); nothing here talks to a network.
//
// A message holds a secret (an invitation's one-time link), so its text is
// never logged: the mailbox's files are readable by their owner only.
package mail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Message is one plain-text e-mail to one address. The sender is the
// adapter's (SES: the stack's verified InvitationSender).
type Message struct {
	To      string
	Subject string
	Text    string
}

// Dir is the local mailbox: Send writes each message as a file in the
// directory, <UTC time>-<sequence>.eml, in the form of RFC 5322 (headers,
// a blank line, the text), so a mail client opens it as well as `cat`.
type Dir string

// ext names a mailbox file.
const ext = ".eml"

var seq atomic.Uint64

// Send writes m as a new file; a reader never sees a half-written one (it
// is written aside and renamed).
func (d Dir) Send(ctx context.Context, m Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if strings.ContainsAny(m.To, "\r\n") || strings.ContainsAny(m.Subject, "\r\n") {
		return errors.New("mail: a header holds a line break")
	}
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: payreq (local stack)\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n",
		m.To, mime.QEncoding.Encode("utf-8", m.Subject), time.Now().UTC().Format(time.RFC1123Z))
	b.WriteString(strings.ReplaceAll(m.Text, "\n", "\r\n"))
	name := fmt.Sprintf("%s-%06d%s", time.Now().UTC().Format("20060102T150405.000000000Z"), seq.Add(1), ext)
	tmp := filepath.Join(string(d), "."+name+".tmp")
	if err := os.WriteFile(tmp, b.Bytes(), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(string(d), name))
}

// Received lists the messages to address in the mailbox, oldest first
// (addresses compared without case).
func (d Dir) Received(address string) ([]Message, error) {
	files, err := os.ReadDir(string(d))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range files {
		if n := f.Name(); strings.HasSuffix(n, ext) && !strings.HasPrefix(n, ".") {
			names = append(names, n)
		}
	}
	slices.Sort(names) // the names start with their time
	var out []Message
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(string(d), n))
		if err != nil {
			return nil, err
		}
		m, ok := parse(string(b))
		if ok && strings.EqualFold(m.To, address) {
			out = append(out, m)
		}
	}
	return out, nil
}

// Latest is the newest message to address; ok is false when there is none.
func (d Dir) Latest(address string) (m Message, ok bool, err error) {
	all, err := d.Received(address)
	if err != nil || len(all) == 0 {
		return Message{}, false, err
	}
	return all[len(all)-1], true, nil
}

func parse(s string) (Message, bool) {
	head, body, ok := strings.Cut(s, "\r\n\r\n")
	if !ok {
		return Message{}, false
	}
	var m Message
	for _, line := range strings.Split(head, "\r\n") {
		k, v, _ := strings.Cut(line, ": ")
		switch k {
		case "To":
			m.To = v
		case "Subject":
			if d, err := new(mime.WordDecoder).DecodeHeader(v); err == nil {
				m.Subject = d
			}
		}
	}
	m.Text = strings.ReplaceAll(body, "\r\n", "\n")
	return m, true
}
