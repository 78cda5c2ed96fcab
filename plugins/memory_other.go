//go:build !unix

package plugins

import "errors"

// mappedMemory is not available off unix: memories live on the Go heap.
type mappedMemory = heapMemory

func reserve(*admission, uint64, uint64) (*mappedMemory, error) {
	return nil, errors.New("address space reservations need unix")
}
