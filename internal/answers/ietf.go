package answers

import (
	"errors"
	"net/http"
	"strings"
	"time"
)

// ietf reads the quotas of the RateLimit field (draft-ietf-httpapi-
// ratelimit-headers, -07 on): a list of items, each a policy's name with
// its remaining units r and the seconds t within which they may be used,
// in the unit RateLimit-Policy gives the policy (qu, "requests" by
// default); or, as -07 had it, a dictionary of limit, remaining and reset.
// Items of units other than requests (content bytes, concurrent requests)
// and items without a t are left out. A field that does not parse is
// ignored whole.
func ietf(fields Fields, qs []Quota) []Quota {
	limits, ok := parseList(fields("RateLimit"))
	if !ok || len(limits) == 0 {
		return qs
	}
	if limits[0].dict {
		var q Quota
		var hasR, hasT bool
		for _, m := range limits {
			switch m.name {
			case "remaining":
				q.Remaining, hasR = number(m.value)
			case "reset":
				var n float64
				n, hasT = number(m.value)
				q.Reset = seconds(n)
			}
		}
		if hasR && hasT {
			q.Unit = Requests
			qs = append(qs, q)
		}
		return qs
	}
	units := map[string]string{}
	if policies, ok := parseList(fields("RateLimit-Policy")); ok {
		for _, p := range policies {
			units[p.name] = p.params["qu"]
		}
	}
	for _, m := range limits {
		if u := units[m.name]; u != "" && u != `"requests"` {
			continue
		}
		r, okR := number(m.params["r"])
		t, okT := number(m.params["t"])
		if okR && okT {
			qs = append(qs, Quota{Unit: Requests, Remaining: r, Reset: seconds(t)})
		}
	}
	return qs
}

// member is one member of a Structured Field list (RFC 9651, section
// 3.1) or dictionary (3.2): its item's value, or its key; a dictionary
// member's value; its parameters, each value as written (a string with
// its quotes).
type member struct {
	name   string
	dict   bool
	value  string
	params map[string]string
}

var errSyntax = errors.New("answers: not a structured field")

// parseList parses the lines of a field as one list of members of bare
// items (strings, tokens, numbers, byte sequences, booleans) with
// parameters, or of dictionary members key=item. It reports false for
// anything else, inner lists included.
func parseList(lines []string) ([]member, bool) {
	s := strings.Join(lines, ",")
	p := parser{s: s}
	var ms []member
	for {
		p.spaces()
		if p.done() {
			return ms, len(ms) > 0 || strings.TrimSpace(s) == ""
		}
		m, err := p.member()
		if err != nil || len(ms) > 64 {
			return nil, false
		}
		ms = append(ms, m)
		p.spaces()
		if p.done() {
			return ms, true
		}
		if p.s[p.i] != ',' {
			return nil, false
		}
		p.i++
	}
}

type parser struct {
	s string
	i int
}

func (p *parser) done() bool { return p.i >= len(p.s) }

func (p *parser) spaces() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// member parses a bare item or a dictionary key=item, then parameters.
func (p *parser) member() (member, error) {
	var m member
	start := p.i
	item, err := p.item()
	if err != nil {
		return m, err
	}
	m.name = unquote(item)
	if !p.done() && p.s[p.i] == '=' && isKey(p.s[start:p.i]) {
		p.i++
		if m.value, err = p.item(); err != nil {
			return m, err
		}
		m.dict = true
	}
	m.params = map[string]string{}
	for !p.done() && p.s[p.i] == ';' {
		p.i++
		p.spaces()
		k := p.key()
		if k == "" {
			return m, errSyntax
		}
		v := "?1"
		if !p.done() && p.s[p.i] == '=' {
			p.i++
			if v, err = p.item(); err != nil {
				return m, err
			}
		}
		m.params[k] = v
	}
	return m, nil
}

// item parses a bare item and returns it as written.
func (p *parser) item() (string, error) {
	if p.done() {
		return "", errSyntax
	}
	start := p.i
	switch c := p.s[p.i]; {
	case c == '"':
		for p.i++; !p.done(); p.i++ {
			switch p.s[p.i] {
			case '\\':
				p.i++
			case '"':
				p.i++
				return p.s[start:p.i], nil
			}
		}
		return "", errSyntax
	case c == ':':
		end := strings.IndexByte(p.s[p.i+1:], ':')
		if end < 0 {
			return "", errSyntax
		}
		p.i += end + 2
	case c == '?':
		if p.i+1 >= len(p.s) || p.s[p.i+1] != '0' && p.s[p.i+1] != '1' {
			return "", errSyntax
		}
		p.i += 2
	case c == '-' || c >= '0' && c <= '9':
		for p.i++; !p.done() && (p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i] == '.'); p.i++ {
		}
	case c == '*' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		for p.i++; !p.done() && isTokenChar(p.s[p.i]); p.i++ {
		}
	default:
		return "", errSyntax
	}
	return p.s[start:p.i], nil
}

// key parses a parameter's key: lower-case letters, digits, "_-.*".
func (p *parser) key() string {
	start := p.i
	for !p.done() && isKeyChar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

func isKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isKeyChar(s[i]) {
			return false
		}
	}
	return true
}

func isKeyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("_-.*", c) >= 0
}

func isTokenChar(c byte) bool {
	return c > ' ' && c < 0x7f && strings.IndexByte(`"(),;<=>?@[\]{}`, c) < 0
}

// unquote returns a string item's content; any other item as it is.
func unquote(item string) string {
	if len(item) < 2 || item[0] != '"' {
		return item
	}
	return strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(item[1 : len(item)-1])
}

// httpTime parses an HTTP-date.
func httpTime(v string) (time.Time, error) { return http.ParseTime(strings.TrimSpace(v)) }
