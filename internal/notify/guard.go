package notify

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// AllowNetsVar is the setting that names the networks a target may reach
// although the guard refuses their kind: serve reads it into
// Service.AllowNets.
const AllowNetsVar = "SLUICE_NOTIFY_ALLOW_NETS"

// refusedNets are the addresses a notification never reaches unless an
// allowed network holds them: what is not the public internet, where an
// admin's target URL would make serve a proxy into its own host and
// network (PostgreSQL, serve's API, a cloud's metadata service).
var refusedNets = []struct {
	prefix netip.Prefix
	kind   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified (this-network)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT (shared)"},
	{netip.MustParsePrefix("169.254.169.254/32"), "the cloud metadata"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol assignment"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved (or broadcast)"},
	{netip.MustParsePrefix("::/128"), "an unspecified"},
	{netip.MustParsePrefix("::1/128"), "a loopback"},
	// IPv4-compatible addresses, deprecated: nothing public lives there.
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible"},
	{netip.MustParsePrefix("fc00::/7"), "a private (unique local)"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast"},
}

// AddressRefusedError is a target address the guard refuses: its host as
// the URL or the resolver gave it, the address, and what kind it is.
type AddressRefusedError struct {
	Addr netip.Addr
	// Kind is "a loopback", "a private", "the cloud metadata" …
	Kind string
}

func (e *AddressRefusedError) Error() string {
	return fmt.Sprintf("%s is %s address, which notifications do not reach unless %s names it", e.Addr, e.Kind, AllowNetsVar)
}

// Guard decides which addresses a delivery may connect to. Its zero value
// refuses every address in refusedNets: loopback, unspecified, private,
// link-local (the metadata service among them), carrier-grade NAT,
// multicast and reserved, in their IPv4-mapped, NAT64 and 6to4 forms too.
type Guard struct {
	// Allow are networks reached although they are of a refused kind, for
	// an operator whose targets live there. Default: none.
	Allow []netip.Prefix
}

// Check returns an *AddressRefusedError when a delivery may not connect to
// ip, and nil when it may.
func (g *Guard) Check(ip netip.Addr) error {
	ip = ip.WithZone("")
	for _, a := range []netip.Addr{ip, ip.Unmap()} {
		for _, p := range g.Allow {
			if p.Contains(a) {
				return nil
			}
		}
	}
	for _, a := range embedded(ip) {
		for _, r := range refusedNets {
			if r.prefix.Contains(a) {
				return &AddressRefusedError{Addr: ip, Kind: r.kind}
			}
		}
	}
	return nil
}

// embedded returns ip and the IPv4 addresses its IPv6 form carries: mapped
// (::ffff:a.b.c.d), NAT64 (64:ff9b::/96) and 6to4 (2002:a.b.c.d::/48),
// each of which the host or its network routes to that IPv4 address.
func embedded(ip netip.Addr) []netip.Addr {
	out := []netip.Addr{ip}
	if !ip.Is6() {
		return out
	}
	b := ip.As16()
	switch {
	case ip.Is4In6():
		out = append(out, ip.Unmap())
	case netip.MustParsePrefix("64:ff9b::/96").Contains(ip):
		out = append(out, netip.AddrFrom4([4]byte(b[12:16])))
	case netip.MustParsePrefix("2002::/16").Contains(ip):
		out = append(out, netip.AddrFrom4([4]byte(b[2:6])))
	}
	return out
}

// control is a net.Dialer's Control hook: it sees the address the dialer
// is about to connect to, after resolution, for every connection (each
// address Happy Eyeballs tries), so neither a name nor DNS rebinding gets
// past it.
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%s is no IP address and port, so it is not dialed", address)
	}
	return g.Check(ap.Addr())
}

// CheckHost refuses a URL host that is an IP address of a refused kind,
// written in any form a resolver accepts: dotted, IPv6, or the decimal,
// octal, hex and short IPv4 forms (2130706433, 0x7f000001, 127.1). A name
// is not resolved here: the dialer checks what it resolves to.
func (g *Guard) CheckHost(host string) error {
	ip, ok := hostIP(host)
	if !ok {
		return nil
	}
	return g.Check(ip)
}

// hostIP returns the address host writes, if it writes one.
func hostIP(host string) (netip.Addr, bool) {
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip, true
	}
	return parseIPv4Loose(host)
}

// parseIPv4Loose parses the IPv4 forms inet_aton and URL parsers accept:
// one to four parts, each decimal, octal (leading 0) or hex (0x), the last
// filling the bytes left.
func parseIPv4Loose(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var vals []uint64
	for _, p := range parts {
		base := 10
		switch {
		case len(p) > 2 && (p[:2] == "0x" || p[:2] == "0X"):
			p, base = p[2:], 16
		case len(p) > 1 && p[0] == '0':
			p, base = p[1:], 8
		}
		if p == "" || strings.ContainsAny(p, "+-_") {
			return netip.Addr{}, false
		}
		v, err := strconv.ParseUint(p, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals = append(vals, v)
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return netip.Addr{}, false
		}
		n |= v << (8 * (3 - i))
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// ParseAllowNets parses a comma-separated list of CIDRs, such as
// "10.0.0.0/8, 127.0.0.1/32". A bare address is not taken: a network says
// how much it allows.
func ParseAllowNets(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a network in CIDR form, such as 10.0.0.0/8 or 127.0.0.1/32", f)
		}
		if p != p.Masked() {
			return nil, fmt.Errorf("%q has host bits set; the network is %s", f, p.Masked())
		}
		out = append(out, p)
	}
	return out, nil
}

// newClient returns the client deliveries are sent with: every connection
// dialed through g, no proxy (a proxy would be dialed instead, and reach
// what g refuses), and no redirect followed (a redirect is answered as a
// failure, so a target cannot send a delivery elsewhere).
func newClient(g *Guard) *http.Client {
	dialer := &net.Dialer{Timeout: DefaultSendTimeout, KeepAlive: 30 * time.Second, Control: g.control}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = dialer.DialContext
	return &http.Client{
		Timeout:       DefaultSendTimeout,
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// refused returns the guard's refusal in err's chain, if there is one.
func refused(err error) (*AddressRefusedError, bool) {
	var re *AddressRefusedError
	ok := errors.As(err, &re)
	return re, ok
}
