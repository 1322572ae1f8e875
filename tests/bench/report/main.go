// Command report turns the benchmark suite's output (go test -bench text)
// into a Markdown table and a PNG bar chart, so that a run of the suite
// (`make bench`) leaves figures anyone can compare.
//
//	go run ./tests/bench/report -in bench.txt -md results.md -png results.png
package main

import (
	"bufio"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Result is one benchmark line: its name (without the GOMAXPROCS suffix)
// and its metrics by unit.
type Result struct {
	Name    string
	Metrics map[string]float64
}

var lineRE = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+\d+\s+(.*)$`)

// Parse reads go test -bench output; repeated names (-count) are averaged.
func Parse(r io.Reader) ([]Result, error) {
	var order []string
	sums := map[string]map[string]float64{}
	counts := map[string]map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := lineRE.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		name := strings.TrimPrefix(m[1], "Benchmark")
		f := strings.Fields(m[3])
		if sums[name] == nil {
			sums[name], counts[name] = map[string]float64{}, map[string]int{}
			order = append(order, name)
		}
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			sums[name][f[i+1]] += v
			counts[name][f[i+1]]++
		}
	}
	var out []Result
	for _, n := range order {
		r := Result{Name: n, Metrics: map[string]float64{}}
		for u, s := range sums[n] {
			r.Metrics[u] = s / float64(counts[n][u])
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// columns shown in the table, in order, when any result has them.
var columns = []struct{ unit, title string }{
	{"rec/s", "records/s"}, {"healthy_rec/s", "healthy records/s"}, {"x_ref", "× reference"}, {"x_off", "× off"},
	{"bound_rec/s", "Little's bound"}, {"of_bound", "of bound"}, {"x_blocking", "× blocking"},
	{"x_native", "× native Go"}, {"x_group", "× consumer group"}, {"x_1host", "× one host"}, {"before_assigned", "done before all assigned"}, {"rec/txn", "records/transaction"},
	{"p50_ms", "p50 ms"}, {"p99_ms", "p99 ms"}, {"cpu_s", "CPU s"}, {"peak_rss_MiB", "peak RSS MiB"},
	{"process_s", "drain s"}, {"full_restore_s", "full restore s"}, {"full_restore_s/100k_keys", "s per 100k keys"},
	{"restore_x_process", "restore ÷ drain"}, {"first_rec_s", "assignment → first record s"},
	{"clean_records_read", "clean restart: records read"}, {"clean_restore_s", "clean restart s"},
	{"kill_records_read", "after SIGKILL: records read"}, {"kill_restore_s", "after SIGKILL s"},
}

// Markdown writes the results as one table per benchmark.
func Markdown(w io.Writer, rs []Result) {
	groups := map[string][]Result{}
	var order []string
	for _, r := range rs {
		g, _, _ := strings.Cut(r.Name, "/")
		if groups[g] == nil {
			order = append(order, g)
		}
		groups[g] = append(groups[g], r)
	}
	var micro []Result // benchmarks with only the standard figures (ns/op, B/op, allocs/op)
	for _, g := range order {
		var cols []int
		for i, c := range columns {
			for _, r := range groups[g] {
				if _, ok := r.Metrics[c.unit]; ok {
					cols = append(cols, i)
					break
				}
			}
		}
		if len(cols) == 0 {
			micro = append(micro, groups[g]...)
			continue
		}
		fmt.Fprintf(w, "\n### %s\n\n| run |", g)
		for _, i := range cols {
			fmt.Fprintf(w, " %s |", columns[i].title)
		}
		fmt.Fprint(w, "\n|---|")
		for range cols {
			fmt.Fprint(w, "---|")
		}
		fmt.Fprintln(w)
		for _, r := range groups[g] {
			_, sub, _ := strings.Cut(r.Name, "/")
			fmt.Fprintf(w, "| %s |", sub)
			for _, i := range cols {
				if v, ok := r.Metrics[columns[i].unit]; ok {
					fmt.Fprintf(w, " %s |", format(v))
				} else {
					fmt.Fprint(w, " |")
				}
			}
			fmt.Fprintln(w)
		}
	}
	if len(micro) > 0 {
		fmt.Fprint(w, "\n### Microbenchmarks\n\n| benchmark | ns/op | B/op | allocs/op |\n|---|---|---|---|\n")
		for _, r := range micro {
			fmt.Fprintf(w, "| %s |", r.Name)
			for _, u := range []string{"ns/op", "B/op", "allocs/op"} {
				if v, ok := r.Metrics[u]; ok {
					fmt.Fprintf(w, " %s |", format(v))
				} else {
					fmt.Fprint(w, " |")
				}
			}
			fmt.Fprintln(w)
		}
	}
}

func format(v float64) string {
	switch {
	case v >= 1000:
		s := strconv.FormatFloat(v, 'f', 0, 64)
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		return s
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// Chart draws one horizontal bar per result with a ratio (× reference, of
// bound or × blocking), grouped by benchmark, labelled, as a PNG.
func Chart(w io.Writer, rs []Result) error {
	type bar struct {
		label string
		v     float64
		unit  string
	}
	var bars []bar
	for _, r := range rs {
		for _, u := range []string{"x_ref", "of_bound", "x_off"} {
			if v, ok := r.Metrics[u]; ok {
				bars = append(bars, bar{r.Name, v, u})
				break
			}
		}
	}
	sort.SliceStable(bars, func(i, j int) bool { return bars[i].unit < bars[j].unit })
	const rowH, labelW, barW, pad = 18, 430, 360, 10
	width, height := labelW+barW+120, pad*2+rowH*(len(bars)+2)
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	for i := range img.Pix {
		img.Pix[i] = 255
	}
	d := &font.Drawer{Dst: img, Src: image.NewUniform(color.Black), Face: basicfont.Face7x13}
	text := func(x, y int, s string) {
		d.Dot = fixed.P(x, y)
		d.DrawString(s)
	}
	text(pad, pad+12, "wasmstream benchmark suite: ratio to the reference measured in the same run (bars), value at right")
	max := 1.0
	for _, b := range bars {
		if b.v > max && b.unit != "x_ref" {
			max = b.v
		}
	}
	colors := map[string]color.RGBA{"x_ref": {52, 101, 164, 255}, "of_bound": {78, 154, 6, 255}, "x_off": {204, 120, 0, 255}}
	for i, b := range bars {
		y := pad + rowH*(i+2)
		label := b.label
		if len(label) > 60 {
			label = label[:60]
		}
		text(pad, y+12, label)
		scale := 1.0
		if b.unit != "x_ref" {
			scale = max
		}
		n := int(float64(barW) * min(b.v/scale, 1))
		for x := labelW; x < labelW+n; x++ {
			for yy := y + 3; yy < y+rowH-3; yy++ {
				img.Set(x, yy, colors[b.unit])
			}
		}
		text(labelW+n+6, y+12, fmt.Sprintf("%s %s", format(b.v), strings.ReplaceAll(b.unit, "_", " ")))
	}
	return png.Encode(w, img)
}

func main() {
	in := flag.String("in", "-", "go test -bench output (- for stdin)")
	md := flag.String("md", "", "write the Markdown tables here")
	pngOut := flag.String("png", "", "write the PNG chart here")
	header := flag.String("header", "", "Markdown written before the tables (the machine, the command)")
	flag.Parse()
	var r io.Reader = os.Stdin
	if *in != "-" {
		f, err := os.Open(*in)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer f.Close()
		r = f
	}
	rs, err := Parse(r)
	if err != nil || len(rs) == 0 {
		fmt.Fprintf(os.Stderr, "report: no benchmark results read (%v)\n", err)
		os.Exit(1)
	}
	if *md != "" {
		f, err := os.Create(*md)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Fprint(f, strings.TrimRight(*header, "\n")+"\n")
		Markdown(f, rs)
		f.Close()
	} else {
		Markdown(os.Stdout, rs)
	}
	if *pngOut != "" {
		f, err := os.Create(*pngOut)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := Chart(f, rs); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		f.Close()
	}
}
