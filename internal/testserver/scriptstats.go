package testserver

import (
	"fmt"
	"regexp"
	"strconv"
)

// scriptStat matches the INFO commandstats lines of the commands that run
// Lua on the server: FCALL (sluice's function library), EVALSHA and EVAL
// (scripts, as redis_rate runs them).
var scriptStat = regexp.MustCompile(`cmdstat_(?:fcall|evalsha|eval):calls=(\d+),usec=(\d+)`)

// ScriptStats returns the microseconds the Redis server at addr has spent
// running Lua (FCALL, EVALSHA and EVAL) since it started or since CONFIG
// RESETSTAT, and how many such calls it has run, by INFO commandstats:
// the server's time per decision of a limiter that decides in Lua.
func ScriptStats(addr string) (usec, calls int64, err error) {
	reply, err := Do(addr, "INFO", "commandstats")
	if err != nil {
		return 0, 0, err
	}
	for _, m := range scriptStat.FindAllStringSubmatch(fmt.Sprint(reply), -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64) // digits, by the pattern
		u, _ := strconv.ParseInt(m[2], 10, 64)
		calls += n
		usec += u
	}
	return usec, calls, nil
}
