package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/weftworks/weft/host/node"
)

// actorSchedulesFile is who the schedules of schedules_file are saved by,
// in their records.
const actorSchedulesFile = "schedules_file"

// applySchedules saves the schedules of schedules_file, in the file's
// order. An unchanged document changes nothing, so that a restart keeps
// each schedule's state; schedules the file does not name are left as
// they are.
func applySchedules(ctx context.Context, n *node.Node, file string, docs [][]byte, log *slog.Logger) error {
	var created, changed, unchanged []string
	for _, doc := range docs {
		v, isNew, isChanged, err := n.SaveSchedule(ctx, doc, "", actorSchedulesFile)
		if err != nil {
			return fmt.Errorf("schedules_file %s: %w", file, err)
		}
		switch {
		case isNew:
			created = append(created, v.ID)
		case isChanged:
			changed = append(changed, v.ID)
		default:
			unchanged = append(unchanged, v.ID)
		}
	}
	log.Info("schedules_file applied", "file", file, "created", strings.Join(created, ","), "changed", strings.Join(changed, ","), "unchanged", strings.Join(unchanged, ","))
	return nil
}
