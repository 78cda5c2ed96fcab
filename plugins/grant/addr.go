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
	// Port is the port refused with the address, for ClassListener; 0
	// when the address is refused on every port.
	Port uint16
}

// ClassListener is the Class of an address and port the host itself
// listens on (its API, console and metrics): no plugin reaches them,
// whatever its grants, or it could grant itself anything.
const ClassListener = "host listener"

// Error implements error.
func (e *AddressError) Error() string {
	if e.Class == ClassListener {
		return fmt.Sprintf("%s is the host's own listener (its API), which plugins never reach, whatever their grants", netip.AddrPortFrom(e.Addr, e.Port))
	}
	if e.Never {
		return fmt.Sprintf("%s is a %s address, which plugins never reach", e.Addr, e.Class)
	}
	return fmt.Sprintf("%s is a %s address; only a host rule with private_networks reaches it", e.Addr, e.Class)
}

// Unwrap returns ErrAddress.
func (e *AddressError) Unwrap() error { return ErrAddress }

// classMetadata is the class of the cloud metadata addresses.
const classMetadata = "metadata"

// Addresses no grant reaches: where cloud platforms serve instance
// credentials, and addresses that are not a single host.
var never = []struct {
	prefix netip.Prefix
	class  string
}{
	{netip.MustParsePrefix("169.254.169.254/32"), classMetadata}, // AWS, GCP, Azure, OpenStack …
	{netip.MustParsePrefix("169.254.170.2/32"), classMetadata},   // AWS ECS task credentials
	{netip.MustParsePrefix("100.100.100.200/32"), classMetadata}, // Alibaba Cloud
	{netip.MustParsePrefix("fd00:ec2::254/128"), classMetadata},  // AWS over IPv6
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},          // "this network"; 0.0.0.0 reaches loopback
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},   //
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},          //
	{netip.MustParsePrefix("ff00::/8"), "multicast"},             //
	{netip.MustParsePrefix("::/128"), "unspecified"},             //
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
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64
	netip.MustParsePrefix("::ffff:0:0:0/96"), // SIIT, IPv4-translated (RFC 6145)
	netip.MustParsePrefix("::/96"),           // IPv4-compatible (deprecated)
}

// localNAT64 is the local-use NAT64 prefix (RFC 8215): it translates to
// whatever its network's operator says, with the IPv4 address at any of
// the positions RFC 6052 allows, so it is never public, and no position
// may hold a metadata address.
var localNAT64 = netip.MustParsePrefix("64:ff9b:1::/48")

// nat64Positions are where RFC 6052 puts the IPv4 address in an IPv6
// address, for the prefix lengths 48, 56, 64 and 96 (byte 8 is never
// used).
var nat64Positions = [][4]int{{6, 7, 9, 10}, {7, 9, 10, 11}, {9, 10, 11, 12}, {12, 13, 14, 15}}

// Reached returns the address a connection to a reaches, as far as the
// address tells: a without a zone, an IPv4-mapped, IPv4-translated,
// IPv4-compatible or well-known NAT64 address as its IPv4 address.
func Reached(a netip.Addr) netip.Addr {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		for _, p := range embedding {
			if p.Contains(a) && a != netip.IPv6Unspecified() && a != netip.IPv6Loopback() {
				b := a.As16()
				return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
			}
		}
	}
	return a
}

// CheckAddr returns nil when a request may connect to a, under a rule that
// does (privateNetworks) or does not reach private networks, and an
// *AddressError otherwise. It is called with the address the connection is
// about to use, after name resolution, so that a name that resolves to a
// private address (or starts to, between two requests) is caught.
func CheckAddr(a netip.Addr, privateNetworks bool) error {
	a = Reached(a)
	if a.Is6() {
		if localNAT64.Contains(a) {
			b := a.As16()
			for _, pos := range nat64Positions {
				v4 := netip.AddrFrom4([4]byte{b[pos[0]], b[pos[1]], b[pos[2]], b[pos[3]]})
				// Only the metadata addresses: the other positions of an
				// address hold bytes that are no address at all, often
				// zeros ("this network").
				var ae *AddressError
				if errors.As(CheckAddr(v4, true), &ae) && ae.Class == classMetadata {
					return &AddressError{Addr: a, Class: "local-use NAT64 of a " + classMetadata, Never: true}
				}
			}
			if !privateNetworks {
				return &AddressError{Addr: a, Class: "local-use NAT64"}
			}
			return nil
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
