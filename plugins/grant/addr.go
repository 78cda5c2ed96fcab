package grant

import (
	"errors"
	"fmt"
	"net/netip"
)

// ErrAddress matches a *AddressError.
var ErrAddress = errors.New("address not reachable by plugins")

// AddressError says that a request was about to connect to an address its
// rule does not let it reach.
type AddressError struct {
	Addr netip.Addr
	// Class names the kind of address: "loopback", "private",
	// "link-local", "metadata" and so on.
	Class string
	// Never is true for addresses no grant makes reachable.
	Never bool
}

// Error implements error.
func (e *AddressError) Error() string {
	if e.Never {
		return fmt.Sprintf("%s is a %s address, which plugins never reach", e.Addr, e.Class)
	}
	return fmt.Sprintf("%s is a %s address; only a host rule with private_networks reaches it", e.Addr, e.Class)
}

// Unwrap returns ErrAddress.
func (e *AddressError) Unwrap() error { return ErrAddress }

// Addresses no grant reaches: where cloud platforms serve instance
// credentials, and addresses that are not a single host.
var never = []struct {
	prefix netip.Prefix
	class  string
}{
	{netip.MustParsePrefix("169.254.169.254/32"), "metadata"},  // AWS, GCP, Azure, OpenStack …
	{netip.MustParsePrefix("169.254.170.2/32"), "metadata"},    // AWS ECS task credentials
	{netip.MustParsePrefix("100.100.100.200/32"), "metadata"},  // Alibaba Cloud
	{netip.MustParsePrefix("fd00:ec2::254/128"), "metadata"},   // AWS over IPv6
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},        // "this network"; 0.0.0.0 reaches loopback
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"}, //
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},        //
	{netip.MustParsePrefix("ff00::/8"), "multicast"},           //
	{netip.MustParsePrefix("::/128"), "unspecified"},           //
}

// Addresses only a rule with PrivateNetworks reaches.
var private = []struct {
	prefix netip.Prefix
	class  string
}{
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("fc00::/7"), "private"}, // unique local, fd00::/8 included
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (carrier-grade NAT)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
}

// Translated IPv6 prefixes that carry an IPv4 address in their last 32
// bits: the embedded address is what the connection reaches.
var embedding = []netip.Prefix{
	netip.MustParsePrefix("64:ff9b::/96"), // NAT64
	netip.MustParsePrefix("::/96"),        // IPv4-compatible (deprecated)
}

// CheckAddr returns nil when a request may connect to a, under a rule that
// does (privateNetworks) or does not reach private networks, and an
// *AddressError otherwise. It is called with the address the connection is
// about to use, after name resolution, so that a name that resolves to a
// private address (or starts to, between two requests) is caught.
func CheckAddr(a netip.Addr, privateNetworks bool) error {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		for _, p := range embedding {
			if p.Contains(a) && a != netip.IPv6Unspecified() && a != netip.IPv6Loopback() {
				b := a.As16()
				a = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
				break
			}
		}
		// 6to4 (2002::/16) carries an IPv4 address in bits 16–48.
		if netip.MustParsePrefix("2002::/16").Contains(a) {
			b := a.As16()
			if err := CheckAddr(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), privateNetworks); err != nil {
				return err
			}
		}
	}
	for _, n := range never {
		if n.prefix.Contains(a) {
			return &AddressError{Addr: a, Class: n.class, Never: true}
		}
	}
	if privateNetworks {
		return nil
	}
	for _, p := range private {
		if p.prefix.Contains(a) {
			return &AddressError{Addr: a, Class: p.class}
		}
	}
	return nil
}
