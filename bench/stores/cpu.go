package stores

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// cpuTicks are the machine's CPU time counters since boot, in ticks: all
// of them and the idle ones (idle and waiting for I/O).
type cpuTicks struct{ total, idle uint64 }

// readCPU reads the machine's counters from /proc/stat; ok is false where
// there is none (not Linux).
func readCPU() (t cpuTicks, ok bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return t, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return t, false
	}
	return parseCPU(sc.Text())
}

// parseCPU parses the aggregate "cpu" line of /proc/stat: user nice system
// idle iowait irq softirq steal (guest time is already in user).
func parseCPU(line string) (t cpuTicks, ok bool) {
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return t, false
	}
	for i, f := range fields[1:9] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return cpuTicks{}, false
		}
		t.total += v
		if i == 3 || i == 4 {
			t.idle += v
		}
	}
	return t, true
}

// busyMeter adds up the machine's CPU use over the spells it is run for.
type busyMeter struct {
	busy, total uint64
	start       cpuTicks
	ok          bool
}

// begin starts a spell.
func (m *busyMeter) begin() { m.start, m.ok = readCPU() }

// end ends the spell begun last and adds it.
func (m *busyMeter) end() {
	now, ok := readCPU()
	if !ok || !m.ok || now.total <= m.start.total {
		m.ok = false
		return
	}
	m.total += now.total - m.start.total
	m.busy += (now.total - m.start.total) - (now.idle - m.start.idle)
}

// share is the machine's CPU busy over every spell, 0 to 1; -1 when it
// could not be read.
func (m *busyMeter) share() float64 {
	if m.total == 0 {
		return -1
	}
	return float64(m.busy) / float64(m.total)
}
