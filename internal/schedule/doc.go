// Package schedule is the pure core of schedules: when a schedule fires
// (its calendar: cron expressions and intervals in a time zone, between a
// start and an end, with jitter) and what it does when it fires (its
// policies: overlap with a run still going, catching up after downtime,
// pausing on a failure, a limit on runs).
//
// Nothing here reads a clock, a store or the network: Step takes the
// schedule's state and the time, and returns the runs to start and cancel,
// the fires it skipped and why, and when to look again. The scheduler that
// calls it (internal/engine) persists the state, starts the runs and
// takes the singleton lock; because a run's instance id is derived from
// the schedule and the fire's nominal time (InstanceID), a fire that two
// nodes both compute starts one instance.
//
// Calendar rules, chosen as users of cron expect (docs/schedules.md):
//   - A local time that a daylight-saving change skips (02:30 on the day
//     the clocks go from 02:00 to 03:00) fires once, at the first instant
//     after the gap (03:00 local). Several skipped times fire once.
//   - A local time that a change repeats (02:30 on the day the clocks go
//     back from 03:00 to 02:00) fires once, at its first occurrence.
//   - Day 31 fires only in months that have one; 29 February only in leap
//     years. A cron expression that can never fire is refused.
//   - Leap seconds do not exist (as in Go's time package).
//   - A clock that jumps backwards fires nothing twice: a fire is taken
//     once, and the state remembers the last one taken.
package schedule
