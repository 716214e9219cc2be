package compose

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/yamlsrc"
)

// maxPortRange bounds how many ports one range may expand to, so a typo like "1-65535"
// cannot make thousands of Service ports silently.
const maxPortRange = 1000

// ports reads a service's ports: numbers, short strings, or long-syntax objects.
func (l *loader) ports(n *yaml.Node, field string) []Port {
	d := yamlsrc.Deref(n)
	if yamlsrc.IsNull(d) {
		return nil
	}
	if d.Kind != yaml.SequenceNode {
		l.Expected(n, field, "a list of ports")
		return nil
	}
	var out []Port
	for i, item := range d.Content {
		f := yamlsrc.Index(field, i)
		id := yamlsrc.Deref(item)
		if id != nil && id.Kind == yaml.MappingNode {
			if p, ok := l.longPort(item, f); ok {
				out = append(out, p)
			}
			continue
		}
		s, ok := l.Str(item, f)
		if !ok {
			continue
		}
		ps, hostIP, err := parsePort(s)
		if err != nil {
			l.Errorf(item, f, "%v", err)
			continue
		}
		if hostIP != "" {
			l.Warnf("%s: %s: host IP %s ignored; the port is published through the cluster", l.Pos(item), f, hostIP)
		}
		out = append(out, ps...)
	}
	return out
}

// parsePort parses the short syntax: [[host_ip:]host:]container[/protocol], where host and
// container may be ranges ("8000-8005:3000-3005"). Ranges are expanded.
func parsePort(s string) (ports []Port, hostIP string, err error) {
	bad := func(why string) error {
		return fmt.Errorf("invalid port %s: %s (expected 8080, 80:8080, 127.0.0.1:80:8080, 3000-3005 or 80:8080/udp)", yamlsrc.Quote(s), why)
	}
	spec := strings.TrimSpace(s)
	protocol := "TCP"
	if i := strings.LastIndex(spec, "/"); i >= 0 {
		switch strings.ToLower(spec[i+1:]) {
		case "tcp":
		case "udp":
			protocol = "UDP"
		default:
			return nil, "", bad("protocol must be tcp or udp")
		}
		spec = spec[:i]
	}
	// An IPv6 host IP is written in brackets: [::1]:80:8080.
	if strings.HasPrefix(spec, "[") {
		end := strings.Index(spec, "]:")
		if end < 0 {
			return nil, "", bad("unclosed [ in host IP")
		}
		hostIP, spec = spec[1:end], spec[end+2:]
	}
	parts := strings.Split(spec, ":")
	var hostPart, containerPart string
	switch len(parts) {
	case 1:
		containerPart = parts[0]
	case 2:
		hostPart, containerPart = parts[0], parts[1]
	case 3:
		if hostIP != "" {
			return nil, "", bad("too many ':'")
		}
		hostIP, hostPart, containerPart = parts[0], parts[1], parts[2]
	default:
		return nil, "", bad("too many ':'")
	}
	cFrom, cTo, err := portRange(containerPart)
	if err != nil {
		return nil, "", bad("container port " + err.Error())
	}
	if hostPart == "" {
		// ":8000", or "${HOST_PORT}:8000" with the variable unset: Compose reads a port with no
		// host part, reachable only inside the cluster.
		for p := cFrom; p <= cTo; p++ {
			ports = append(ports, Port{ContainerPort: p, Protocol: protocol})
		}
		return ports, hostIP, nil
	}
	hFrom, hTo, err := portRange(hostPart)
	if err != nil {
		return nil, "", bad("host port " + err.Error())
	}
	switch {
	case hTo-hFrom == cTo-cFrom:
	case cFrom == cTo:
		// Docker picks any free host port of the range; a cluster has no such choice, so the
		// first one is used.
		hTo = hFrom
	default:
		return nil, "", bad("host and container ranges have different lengths")
	}
	for i := int32(0); i <= cTo-cFrom; i++ {
		ports = append(ports, Port{ContainerPort: cFrom + i, HostPort: hFrom + i, Protocol: protocol})
	}
	return ports, hostIP, nil
}

// portRange parses "8080" or "3000-3005".
func portRange(s string) (from, to int32, err error) {
	if t := strings.TrimSpace(s); strings.HasPrefix(t, "-") {
		// "-80" is a negative number, not a range with no start: keep its sign in the message.
		return 0, 0, fmt.Errorf("%s is not a number between 1 and 65535", yamlsrc.Quote(t))
	}
	a, b, isRange := strings.Cut(s, "-")
	from, err = portNumber(a)
	if err != nil {
		return 0, 0, err
	}
	to = from
	if isRange {
		if to, err = portNumber(b); err != nil {
			return 0, 0, err
		}
		if to < from {
			return 0, 0, fmt.Errorf("range %s ends before it starts", s)
		}
		if to-from >= maxPortRange {
			return 0, 0, fmt.Errorf("range %s has more than %d ports", s, maxPortRange)
		}
	}
	return from, to, nil
}

func portNumber(s string) (int32, error) {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < 1 || v > 65535 {
		return 0, fmt.Errorf("%s is not a number between 1 and 65535", yamlsrc.Quote(s))
	}
	return int32(v), nil
}

// longPort reads {target, published, protocol, host_ip, ...}.
func (l *loader) longPort(n *yaml.Node, field string) (Port, bool) {
	p := Port{Protocol: "TCP"}
	es, _ := l.Mapping(n, field)
	ok := true
	for _, e := range es {
		f := yamlsrc.Join(field, e.Key)
		switch e.Key {
		case "target":
			s, good := l.Str(e.Val, f)
			if v, err := portNumber(s); good && err == nil {
				p.ContainerPort = v
			} else if good {
				l.Errorf(e.Val, f, "expected a port between 1 and 65535, found %s", yamlsrc.Quote(s))
				ok = false
			} else {
				l.Errorf(e.Val, f, "expected a port between 1 and 65535, found %s", yamlsrc.KindName(e.Val))
				ok = false
			}
		case "published":
			s, good := l.Str(e.Val, f)
			if !good || s == "" {
				continue
			}
			if from, _, err := portRange(s); err == nil {
				p.HostPort = from
			} else {
				l.Errorf(e.Val, f, "expected a port between 1 and 65535, found %q", s)
				ok = false
			}
		case "protocol":
			s, _ := l.Str(e.Val, f)
			switch strings.ToLower(s) {
			case "tcp", "":
			case "udp":
				p.Protocol = "UDP"
			default:
				l.Errorf(e.Val, f, "expected tcp or udp, found %q", s)
				ok = false
			}
		case "host_ip":
			if s, _ := l.Str(e.Val, f); s != "" {
				l.Warnf("%s: %s: host IP %s ignored; the port is published through the cluster", l.Pos(e.Val), f, s)
			}
		default:
			if !strings.HasPrefix(e.Key, "x-") {
				l.Ignore(e.KeyNode, f)
			}
		}
	}
	if p.ContainerPort == 0 && ok {
		l.Errorf(n, field, "target (the container port) is required")
		ok = false
	}
	return p, ok
}
