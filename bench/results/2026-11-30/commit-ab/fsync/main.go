// Command fsync measures the floor under a durable commit on this
// filesystem: the latency of one 4 KiB pwrite + fdatasync, in place (into
// a file already written and synced: what bbolt's data pages and meta page
// pay once the file has grown, and Pebble's recycled WAL) or appending
// (the file grows: fdatasync also journals the new size). Prints one JSON
// line ("H40J {...}").
//
//	fsync -n 2000 -dir DIR
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

func main() {
	n := flag.Int("n", 2000, "syncs per mode")
	dir := flag.String("dir", os.TempDir(), "directory for the file")
	flag.Parse()
	page := make([]byte, 4096)
	out := map[string]any{"n": *n}
	for _, mode := range []string{"inplace", "append"} {
		path := filepath.Join(*dir, "h40j-fsync-"+mode)
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			log.Fatal(err)
		}
		if mode == "inplace" {
			for i := range *n {
				if _, err := f.WriteAt(page, int64(i)*4096); err != nil {
					log.Fatal(err)
				}
			}
			if err := f.Sync(); err != nil {
				log.Fatal(err)
			}
		}
		lat := make([]time.Duration, 0, *n)
		for i := range *n {
			page[0] = byte(i)
			t0 := time.Now()
			if _, err := f.WriteAt(page, int64(i)*4096); err != nil {
				log.Fatal(err)
			}
			if err := syscall.Fdatasync(int(f.Fd())); err != nil {
				log.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		_ = f.Close()
		_ = os.Remove(path)
		slices.Sort(lat)
		q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
		out[mode+"_p50_us"], out[mode+"_p90_us"], out[mode+"_p99_us"] = q(0.5), q(0.9), q(0.99)
	}
	b, _ := json.Marshal(out)
	fmt.Println("H40J " + string(b))
}
