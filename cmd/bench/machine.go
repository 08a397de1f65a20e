package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// machine is what the figures were measured on.
type machine struct {
	cpu      string
	cores    int
	memory   string
	kernel   string
	postgres string
}

func describeMachine(ctx context.Context, pg *postgres) machine {
	m := machine{cpu: "unknown CPU", cores: runtime.NumCPU(), memory: "?", kernel: "?", postgres: "?"}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.Join(strings.Fields(v), " ")
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				m.memory = fmt.Sprintf("%.1f GiB", kb/(1<<20))
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = "Linux " + strings.TrimSpace(string(b))
	}
	_ = pg.pool.QueryRow(ctx, `SELECT current_setting('server_version') || ', shared_buffers ' ||
		current_setting('shared_buffers') || ', fsync ' || current_setting('fsync') ||
		', synchronous_commit ' || current_setting('synchronous_commit')`).Scan(&m.postgres)
	return m
}

func (m machine) String() string {
	return fmt.Sprintf("%s, %d cores, %s RAM, %s; PostgreSQL %s (same machine, unix socket)",
		m.cpu, m.cores, m.memory, m.kernel, m.postgres)
}

// loadAverage is the 1-minute load, which shows what else ran on the machine.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// clockTicks is USER_HZ, the unit of /proc CPU times; 100 on every Linux we run.
const clockTicks = 100

// cpuSample is the CPU time spent so far by the machine and by each party.
type cpuSample struct {
	at                      time.Time
	busy                    float64 // whole machine, seconds
	server, postgres, bench float64 // seconds
	workers                 []float64
}

// cpuParties names the processes a sample splits the machine's CPU time between.
type cpuParties struct {
	server    func() int // pid of the server under test, 0 when in-process
	postgres  func() int // pid of the postmaster (a Citus cluster's coordinator)
	benchSelf int
	workers   []func() int // pids of a Citus cluster's workers' postmasters
}

func (p cpuParties) sample() cpuSample {
	s := cpuSample{at: time.Now(), busy: machineBusy()}
	s.bench = procCPU(p.benchSelf, true)
	if pid := p.server(); pid > 0 {
		s.server = procCPU(pid, true)
	}
	s.postgres = postmasterCPU(p.postgres())
	for _, w := range p.workers {
		s.workers = append(s.workers, postmasterCPU(w()))
	}
	return s
}

// postmasterCPU is the CPU time of a postmaster and its backends, in seconds.
func postmasterCPU(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	sum := procCPU(pid, true)
	for _, child := range childrenOf(pid) {
		sum += procCPU(child, false)
	}
	return sum
}

// cpuUse is how busy each party kept the CPUs between two samples, in percent of
// one core (so 2 cores fully busy is 200%), over secs seconds.
type cpuUse struct {
	server, postgres, bench, others, total float64
	workers                                []float64
	secs                                   float64
}

func (a cpuSample) to(b cpuSample) cpuUse {
	secs := b.at.Sub(a.at).Seconds()
	if secs <= 0 {
		return cpuUse{}
	}
	pct := func(x float64) float64 { return 100 * x / secs }
	u := cpuUse{server: pct(b.server - a.server), postgres: pct(b.postgres - a.postgres),
		bench: pct(b.bench - a.bench), total: pct(b.busy - a.busy), secs: secs}
	u.others = u.total - u.server - u.postgres - u.bench
	for i := range min(len(a.workers), len(b.workers)) {
		u.workers = append(u.workers, pct(b.workers[i]-a.workers[i]))
		u.others -= u.workers[i]
	}
	u.others = max(0, u.others)
	return u
}

func (u cpuUse) String() string {
	if u.total == 0 {
		return ""
	}
	if len(u.workers) == 0 {
		return fmt.Sprintf("oncehook %.0f%%, postgres %.0f%%, load generator %.0f%%, other work %.0f%%",
			u.server, u.postgres, u.bench, u.others)
	}
	var w strings.Builder
	for i, x := range u.workers {
		fmt.Fprintf(&w, "worker %d %.0f%%, ", i+1, x)
	}
	return fmt.Sprintf("oncehook %.0f%%, coordinator %.0f%%, %sload generator %.0f%%, other work %.0f%%",
		u.server, u.postgres, w.String(), u.bench, u.others)
}

// perItem says how much CPU each party spent per item, n items done while u was
// measured, in microseconds of one core: what a machine's cores divide into.
func (u cpuUse) perItem(n float64) string {
	if u.total == 0 || n <= 0 {
		return "not measured"
	}
	us := func(pct float64) float64 { return pct / 100 * u.secs / n * 1e6 }
	if len(u.workers) == 0 {
		return fmt.Sprintf("oncehook %.0f µs, postgres %.0f µs", us(u.server), us(u.postgres))
	}
	var w strings.Builder
	sum := 0.0
	for i, x := range u.workers {
		fmt.Fprintf(&w, ", worker %d %.0f µs", i+1, us(x))
		sum += us(x)
	}
	return fmt.Sprintf("oncehook %.0f µs, coordinator %.0f µs%s (workers together %.0f µs)",
		us(u.server), us(u.postgres), w.String(), sum)
}

// machineBusy is the CPU time, in seconds, all cores spent not idle since boot.
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var total float64
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest time is already in user
			continue
		}
		total += n
	}
	return total / clockTicks
}

// procCPU is a process's CPU time in seconds; withChildren adds that of the
// children it has waited for (backends that already exited, for the postmaster).
func procCPU(pid int, withChildren bool) float64 {
	f := procStat(pid)
	if len(f) < 17 {
		return 0
	}
	sum := 0.0
	last := 15
	if withChildren {
		last = 17
	}
	for _, v := range f[13:last] { // utime, stime, cutime, cstime
		n, _ := strconv.ParseFloat(v, 64)
		sum += n
	}
	return sum / clockTicks
}

// procStat returns the fields of /proc/PID/stat, numbered as in proc(5) from 1.
func procStat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return nil
	}
	return append([]string{"pid", "comm"}, strings.Fields(s[i+1:])...)
}

func childrenOf(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	want := strconv.Itoa(pid)
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := procStat(child); len(f) > 3 && f[3] == want {
			out = append(out, child)
		}
	}
	return out
}

// peakRSS reads a process's high-water resident set size (VmHWM) in MiB.
func peakRSS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}
