package stores

import "testing"

func TestParseCPU(t *testing.T) {
	got, ok := parseCPU("cpu  100 5 50 800 20 3 2 0 0 0")
	if !ok || got.total != 980 || got.idle != 820 {
		t.Errorf("parseCPU = %+v, %v; want total 980, idle 820", got, ok)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3", "cpu 1 2 x 4 5 6 7 8"} {
		if _, ok := parseCPU(bad); ok {
			t.Errorf("parseCPU(%q) ok", bad)
		}
	}
}

func TestBusyMeterAddsSpells(t *testing.T) {
	var m busyMeter
	if m.share() != -1 {
		t.Errorf("share before any spell = %v, want -1", m.share())
	}
	if _, ok := readCPU(); !ok {
		t.Skip("no /proc/stat on this system")
	}
	for range 2 {
		m.begin()
		for i := 0; m.total == 0 && i < 1e9; i++ {
			if now, _ := readCPU(); now.total > m.start.total {
				break
			}
		}
		m.end()
	}
	if s := m.share(); s < 0 || s > 1 || m.total == 0 {
		t.Errorf("share over two spells = %v (%d of %d ticks), want a share of ticks counted", s, m.busy, m.total)
	}
}
