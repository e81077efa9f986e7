package client

import "bytes"

// maxKept caps what the Transport keeps of a response at once to read its usage: one SSE event's
// data, or a whole plain JSON body. Past it the usage of that event or body is not read.
const maxKept = 4 << 20

// sseParser splits a server-sent event stream into events as its bytes pass by, in chunks of any
// size. It keeps only the unfinished line and the event being assembled, never the stream. Lines end
// with LF or CRLF (no provider ends them with a lone CR).
type sseParser struct {
	line    []byte // an unfinished line carried over from the previous chunk
	skip    bool   // the current line outgrew maxKept: drop it up to its end
	name    []byte // the event type, from an "event:" line
	data    []byte // the event data, from "data:" lines, each followed by LF
	dropped bool   // some event lost data to maxKept
	emit    func(name, data []byte)
}

// write feeds the next chunk of the stream.
func (p *sseParser) write(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.carry(b)
			return
		}
		seg := b[:i]
		b = b[i+1:]
		switch {
		case p.skip:
			p.skip = false
		case len(p.line) > 0:
			p.carry(seg)
			if !p.skip {
				p.processLine(p.line)
			}
			p.skip = false
			p.line = p.line[:0]
		default:
			p.processLine(seg)
		}
	}
}

// end processes what is left when the stream stops: a last line and event without their
// terminating blank line are taken rather than lost (a cut line fails to parse and is ignored).
func (p *sseParser) end() {
	if len(p.line) > 0 && !p.skip {
		p.processLine(p.line)
	}
	p.line = p.line[:0]
	p.dispatch()
}

func (p *sseParser) carry(b []byte) {
	if p.skip {
		return
	}
	if len(p.line)+len(b) > maxKept {
		p.line = p.line[:0]
		p.skip, p.dropped = true, true
		return
	}
	p.line = append(p.line, b...)
}

func (p *sseParser) processLine(line []byte) {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if len(line) == 0 {
		p.dispatch()
		return
	}
	if line[0] == ':' { // a comment
		return
	}
	field, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
		value = bytes.TrimPrefix(value, []byte{' '})
	}
	switch string(field) {
	case "event":
		p.name = append(p.name[:0], value...)
	case "data":
		if len(p.data)+len(value) >= maxKept {
			p.dropped = true
			p.data = p.data[:0]
			return
		}
		p.data = append(p.data, value...)
		p.data = append(p.data, '\n')
	}
}

// dispatch hands the assembled event on, as the SSE specification says: only when it has data, with
// the last LF removed.
func (p *sseParser) dispatch() {
	if len(p.data) > 0 {
		p.emit(p.name, p.data[:len(p.data)-1])
	}
	p.name = p.name[:0]
	p.data = p.data[:0]
}
