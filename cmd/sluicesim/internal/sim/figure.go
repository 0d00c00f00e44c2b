package sim

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The colours of the figures: from a palette that stays distinct for
// readers with the commonest colour blindness.
var (
	offeredColor  = color.RGBA{170, 170, 170, 255}
	admittedColor = color.RGBA{0, 114, 178, 255}
	deniedColor   = color.RGBA{213, 94, 0, 255}
	stateColor    = color.RGBA{0, 158, 115, 255}
	limitColor    = color.RGBA{60, 60, 60, 255}
)

// pngDPI is the resolution of the PNG figures.
const pngDPI = 96

// Figure is a drawing that can be written as SVG and PNG.
type Figure struct {
	w, h vg.Length
	draw func(dc draw.Canvas)
}

// WriteSVG writes the figure as SVG.
//
// The fonts are not embedded, which would add hundreds of kilobytes to
// every file: text names Liberation Serif, whose metrics the layout
// uses, then Times New Roman and Times, which have the same metrics, so
// that a viewer without Liberation fonts does not fall back on a wider
// serif that would run text into the legends' swatches.
func (f Figure) WriteSVG(w io.Writer) error {
	c := vgsvg.New(f.w, f.h)
	f.draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return err
	}
	_, err := w.Write(bytes.ReplaceAll(b.Bytes(), []byte("font-family:Liberation Serif;"),
		[]byte("font-family:'Liberation Serif','Times New Roman',Times,serif;")))
	return err
}

// WritePNG writes the figure as PNG.
func (f Figure) WritePNG(w io.Writer) error {
	c := vgimg.NewWith(vgimg.UseWH(f.w, f.h), vgimg.UseDPI(pngDPI))
	f.draw(draw.New(c))
	_, err := vgimg.PngCanvas{Canvas: c}.WriteTo(w)
	return err
}

// LimiterFigure draws one limiter's run: the requests offered, admitted
// and denied per bin above, the watched key's state below.
func LimiterFigure(r Run, c *Config) Figure {
	top := requestsPlot(r, c)
	top.Title.Text = wrap(r.Name+"  ·  traffic: "+c.Title, 100)
	bottom := statePlot(r, c)
	bottom.Title.Text = stateTitle(r.Series)
	return Figure{8 * vg.Inch, 5.6 * vg.Inch, func(dc draw.Canvas) {
		fill(dc)
		plots := [][]*plot.Plot{{top}, {bottom}}
		t := draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
			PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
		draws(plots, t, dc)
	}}
}

// CompareFigure draws every limiter's run on the same traffic, one row
// each: requests on the left, state on the right.
func CompareFigure(runs []Run, c *Config) Figure {
	rowH := 1.9 * vg.Inch
	title := wrap("Every limiter on the same traffic: "+c.Title, 130)
	head := 0.25*vg.Inch + 0.22*vg.Inch*vg.Length(strings.Count(title, "\n")+1)
	plots := make([][]*plot.Plot, len(runs))
	for i, r := range runs {
		left, right := requestsPlot(r, c), statePlot(r, c)
		left.Title.Text = r.Name
		right.Title.Text = stateTitle(r.Series)
		if i < len(runs)-1 {
			left.X.Label.Text, right.X.Label.Text = "", ""
		}
		if i > 0 {
			// Every row's legend would say the same.
			left.Legend, right.Legend = plot.NewLegend(), plot.NewLegend()
		}
		plots[i] = []*plot.Plot{left, right}
	}
	return Figure{11 * vg.Inch, head + rowH*vg.Length(len(runs)), func(dc draw.Canvas) {
		fill(dc)
		style := plot.New().Title.TextStyle
		style.Font.Size = 14
		style.XAlign = draw.XCenter
		style.YAlign = draw.YTop
		dc.FillText(style, vg.Point{X: dc.Center().X, Y: dc.Max.Y - 2*vg.Millimeter}, title)
		dc.Max.Y -= head
		// Each column is aligned on its own: plot.Align misplaces the rows
		// of columns whose plots have different margins.
		cols := draw.Tiles{Rows: 1, Cols: 2, PadX: 8 * vg.Millimeter}
		for j := range 2 {
			column := make([][]*plot.Plot, len(plots))
			for i := range plots {
				column[i] = []*plot.Plot{plots[i][j]}
			}
			t := draw.Tiles{Rows: len(runs), Cols: 1, PadY: 3 * vg.Millimeter,
				PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
			draws(column, t, cols.At(dc, j, 0))
		}
	}}
}

func fill(dc draw.Canvas) {
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
}

func draws(plots [][]*plot.Plot, t draw.Tiles, dc draw.Canvas) {
	canvases := plot.Align(plots, t, dc)
	for i := range plots {
		for j, p := range plots[i] {
			p.Draw(canvases[i][j])
		}
	}
}

// newPlot returns a plot with the figures' common style: time in seconds
// along x, over the whole run.
func newPlot(c *Config) *plot.Plot {
	p := plot.New()
	p.Title.TextStyle.Font.Size = 12
	p.X.Label.Text = "simulated time (s)"
	p.X.Min, p.X.Max = 0, c.Duration.Seconds()
	p.X.Tick.Marker = roundTicks{}
	p.Y.Tick.Marker = roundTicks{}
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = 10
	p.Legend.Padding = 0.5 * vg.Millimeter
	p.Legend.ThumbnailWidth = 6 * vg.Millimeter
	p.Add(plotter.NewGrid())
	return p
}

// requestsPlot draws the requests admitted and denied per bin, stacked,
// so that their total is the requests offered.
func requestsPlot(r Run, c *Config) *plot.Plot {
	p := newPlot(c)
	s := r.Series
	p.Y.Label.Text = "requests per " + s.Bin.String()
	offeredName := "offered"
	if len(c.keys()) > 1 {
		offeredName = "offered, all keys"
	}
	var most int64
	for i := range s.Offered {
		most = max(most, s.Offered[i])
	}
	p.Y.Min, p.Y.Max = 0, headroom(float64(most))
	zero := make([]int64, len(s.Offered))
	admitted := stepArea(zero, s.Admitted, s.Bin)
	admitted.Color, admitted.LineStyle.Width = admittedColor, 0
	denied := stepArea(s.Admitted, s.Offered, s.Bin)
	denied.Color, denied.LineStyle.Width = deniedColor, 0
	offered := stepLine(s.Offered, s.Bin)
	offered.Color, offered.Width = offeredColor, vg.Points(0.8)
	p.Add(admitted, denied, offered)
	p.Legend.Add(offeredName, offered)
	p.Legend.Add("admitted", admitted)
	p.Legend.Add("denied", denied)
	return p
}

// statePlot draws the watched key's state, its limit, and its denials.
func statePlot(r Run, c *Config) *plot.Plot {
	p := newPlot(c)
	s := r.Series
	p.Title.Text = s.StateName
	p.Y.Label.Text = "requests"
	if !unitCosts(c) {
		p.Y.Label.Text = "cost"
	}
	p.Y.Min, p.Y.Max = 0, headroom(s.Limit)
	limit, _ := plotter.NewLine(plotter.XYs{{X: 0, Y: s.Limit}, {X: c.Duration.Seconds(), Y: s.Limit}})
	limit.Color, limit.Width, limit.Dashes = limitColor, vg.Points(1), []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(limit)
	p.Legend.Add(fmt.Sprintf("limit (%s)", num(s.Limit)), limit)
	state, _ := plotter.NewLine(points(s.State))
	state.Color, state.Width = stateColor, vg.Points(1.5)
	p.Add(state)
	p.Legend.Add("state", state)
	if len(s.Denials) > 0 {
		denied, _ := plotter.NewScatter(points(s.Denials))
		denied.Shape, denied.Color, denied.Radius = draw.CrossGlyph{}, deniedColor, vg.Points(3)
		p.Add(denied)
		p.Legend.Add("denied", denied)
	}
	return p
}

// stateTitle heads a state panel, saying what a long run left out of it.
func stateTitle(s Series) string {
	title := s.StateName + ", key " + s.Key
	var thinned []string
	if s.StateStride > 1 {
		thinned = append(thinned, "state drawn around every "+ordinal(s.StateStride)+" request")
	}
	if s.DenialStride > 1 {
		thinned = append(thinned, "every "+ordinal(s.DenialStride)+" denial shown")
	}
	if len(thinned) > 0 {
		title += "\n(" + strings.Join(thinned, ", ") + ")"
	}
	return title
}

// ordinal returns "1st", "2nd", "3rd", "4th", ... for n.
func ordinal(n int64) string {
	suffix := "th"
	if n%100/10 != 1 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return strconv.FormatInt(n, 10) + suffix
}

// headroom returns the top of a y axis showing values up to v with room
// for the legend above them.
func headroom(v float64) float64 { return max(v, 1) * 1.6 }

// stepArea fills the area between two step lines of counts per bin,
// lower below upper.
func stepArea(lower, upper []int64, bin time.Duration) *plotter.Polygon {
	outline := stepXYs(upper, bin)
	low := stepXYs(lower, bin)
	for i := len(low) - 1; i >= 0; i-- {
		outline = append(outline, low[i])
	}
	pg, _ := plotter.NewPolygon(outline)
	return pg
}

// stepXYs returns the corners of a step line of counts per bin.
func stepXYs(counts []int64, bin time.Duration) plotter.XYs {
	xys := make(plotter.XYs, 0, 2*len(counts))
	for i, n := range counts {
		x0, x1 := (time.Duration(i) * bin).Seconds(), (time.Duration(i+1) * bin).Seconds()
		if len(xys) > 0 && xys[len(xys)-1].Y == float64(n) {
			xys[len(xys)-1].X = x1 // extend the flat run
			continue
		}
		xys = append(xys, plotter.XY{X: x0, Y: float64(n)}, plotter.XY{X: x1, Y: float64(n)})
	}
	return xys
}

// stepLine draws counts per bin as a line that holds each bin's count
// across its width.
func stepLine(counts []int64, bin time.Duration) *plotter.Line {
	l, _ := plotter.NewLine(stepXYs(counts, bin))
	return l
}

func points(ps []Point) plotter.XYs {
	xys := make(plotter.XYs, len(ps))
	for i, p := range ps {
		xys[i] = plotter.XY{X: p.At.Seconds(), Y: p.Value}
	}
	return xys
}

// unitCosts reports whether every request costs 1.
func unitCosts(c *Config) bool {
	for _, t := range c.Traffic {
		if t.pattern == "csv" {
			for _, r := range t.rows {
				if r.Cost != 1 {
					return false
				}
			}
		} else if t.cost != 1 {
			return false
		}
	}
	return true
}

// render returns the figure's SVG or PNG bytes.
func render(f Figure, format string) ([]byte, error) {
	var b bytes.Buffer
	var err error
	if format == "svg" {
		err = f.WriteSVG(&b)
	} else {
		err = f.WritePNG(&b)
	}
	return b.Bytes(), err
}

// wrap breaks text into lines of at most width characters, at spaces,
// so that a long title is not clipped at the figure's edge.
func wrap(text string, width int) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n")
}

// roundTicks marks an axis at multiples of 1, 2 or 5 times a power of ten,
// three to six of them, labelled with no more digits than they need.
type roundTicks struct{}

// Ticks returns the ticks of the range [lo, hi].
func (roundTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', -1, 64)}}
	}
	step := math.Pow(10, math.Floor(math.Log10((hi-lo)/10)))
	for _, m := range []float64{1, 2, 5, 10, 20, 50} {
		if (hi-lo)/(step*m) <= 6 {
			step *= m
			break
		}
	}
	decimals := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	var ticks []plot.Tick
	for i := math.Ceil(lo/step - 1e-9); i*step <= hi+step*1e-9; i++ {
		v := i*step + 0 // + 0 turns -0 into 0
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', decimals, 64)})
		if minor := v + step/2; minor <= hi {
			ticks = append(ticks, plot.Tick{Value: minor})
		}
	}
	return ticks
}
