package testserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// ReplyError is an error reply from a Redis server, such as "ERR unknown
// command".
type ReplyError string

func (e ReplyError) Error() string { return string(e) }

// Do sends one command to the Redis server (or Sentinel) at addr on a
// connection of its own, and returns its reply: a string for a simple or
// bulk string, an int64 for an integer, a []any for an array, nil for a
// null, and an error wrapping [ReplyError] for an error reply. It waits
// at most a second for the reply.
//
// It is the harness's own client, so that servers can be set up without
// redis-cli and without the client under test.
func Do(addr string, args ...string) (any, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return nil, err
	}
	return readReply(bufio.NewReader(conn))
}

// readReply reads one RESP2 reply.
func readReply(rd *bufio.Reader) (any, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, fmt.Errorf("reply: %w", ReplyError(body))
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 {
			return nil, fmt.Errorf("bad bulk length %q", line)
		}
		if n == -1 {
			return nil, nil
		}
		buf := make([]byte, n+2) // and the closing CRLF
		if _, err := io.ReadFull(rd, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 {
			return nil, fmt.Errorf("bad array length %q", line)
		}
		if n == -1 {
			return nil, nil
		}
		elems := make([]any, n)
		for i := range elems {
			if elems[i], err = readReply(rd); err != nil {
				return nil, err
			}
		}
		return elems, nil
	}
	return nil, fmt.Errorf("unexpected reply %q", line)
}

// send sends command, split at spaces, and returns its reply as a string:
// a simple string, a bulk string's contents or an integer's digits.
func send(addr, command string) (string, error) {
	reply, err := Do(addr, strings.Fields(command)...)
	if err != nil {
		return "", err
	}
	switch r := reply.(type) {
	case string:
		return r, nil
	case int64:
		return strconv.FormatInt(r, 10), nil
	}
	return "", fmt.Errorf("reply %v is not a string", reply)
}
