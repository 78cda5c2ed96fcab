package blobfile_test

import (
	"testing"

	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/blobfile"
	"github.com/weftworks/weft/plugins/blobtest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	blobtest.Exercise(t, func(t *testing.T) plugins.Blobs {
		s, err := blobfile.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
