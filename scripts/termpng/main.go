// Command termpng renders a terminal screen captured with colours
// (`tmux capture-pane -p -e`) to a PNG, for the README's screenshot of
// `gpuscope top`: scripts/readme-images.sh runs it.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"os"
	"strconv"
	"strings"

	"codeberg.org/go-fonts/liberation/liberationmonobold"
	"codeberg.org/go-fonts/liberation/liberationmonoregular"
	"golang.org/x/image/font"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
)

// xterm's 16 colours, as most terminals show them.
var palette16 = []color.RGBA{
	{0x1e, 0x1e, 0x1e, 255}, {0xcd, 0x31, 0x31, 255}, {0x0d, 0xbc, 0x79, 255}, {0xe5, 0xe5, 0x10, 255},
	{0x24, 0x72, 0xc8, 255}, {0xbc, 0x3f, 0xbc, 255}, {0x11, 0xa8, 0xcd, 255}, {0xe5, 0xe5, 0xe5, 255},
	{0x66, 0x66, 0x66, 255}, {0xf1, 0x4c, 0x4c, 255}, {0x23, 0xd1, 0x8b, 255}, {0xf5, 0xf5, 0x43, 255},
	{0x3b, 0x8e, 0xea, 255}, {0xd6, 0x70, 0xd6, 255}, {0x29, 0xb8, 0xdb, 255}, {0xff, 0xff, 0xff, 255},
}

var (
	defaultFG = color.RGBA{0xd4, 0xd4, 0xd4, 255}
	defaultBG = color.RGBA{0x1e, 0x1e, 0x1e, 255}
)

func color256(n int) color.RGBA {
	switch {
	case n < 16:
		return palette16[n]
	case n < 232:
		n -= 16
		step := func(x int) uint8 {
			if x == 0 {
				return 0
			}
			return uint8(55 + 40*x)
		}
		return color.RGBA{step(n / 36), step(n / 6 % 6), step(n % 6), 255}
	}
	g := uint8(8 + 10*(n-232))
	return color.RGBA{g, g, g, 255}
}

type cell struct {
	r      rune
	fg, bg color.RGBA
	bold   bool
}

type pen struct {
	fg, bg        color.RGBA
	bold, reverse bool
}

// sgr applies one Select Graphic Rendition sequence's parameters.
func (p *pen) sgr(params string) {
	if params == "" {
		params = "0"
	}
	ps := strings.Split(params, ";")
	for i := 0; i < len(ps); i++ {
		n, _ := strconv.Atoi(ps[i])
		switch {
		case n == 0:
			*p = pen{fg: defaultFG, bg: defaultBG}
		case n == 1:
			p.bold = true
		case n == 22:
			p.bold = false
		case n == 7:
			p.reverse = true
		case n == 27:
			p.reverse = false
		case n >= 30 && n <= 37:
			p.fg = palette16[n-30]
		case n >= 90 && n <= 97:
			p.fg = palette16[n-90+8]
		case n == 39:
			p.fg = defaultFG
		case n >= 40 && n <= 47:
			p.bg = palette16[n-40]
		case n >= 100 && n <= 107:
			p.bg = palette16[n-100+8]
		case n == 49:
			p.bg = defaultBG
		case (n == 38 || n == 48) && i+2 < len(ps) && ps[i+1] == "5":
			c, _ := strconv.Atoi(ps[i+2])
			if n == 38 {
				p.fg = color256(c)
			} else {
				p.bg = color256(c)
			}
			i += 2
		case (n == 38 || n == 48) && i+4 < len(ps) && ps[i+1] == "2":
			r, _ := strconv.Atoi(ps[i+2])
			g, _ := strconv.Atoi(ps[i+3])
			b, _ := strconv.Atoi(ps[i+4])
			c := color.RGBA{uint8(r), uint8(g), uint8(b), 255}
			if n == 38 {
				p.fg = c
			} else {
				p.bg = c
			}
			i += 4
		}
	}
}

// parse turns the captured text into rows of cells.
func parse(r io.Reader) ([][]cell, error) {
	var rows [][]cell
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	p := pen{fg: defaultFG, bg: defaultBG}
	for sc.Scan() {
		var row []cell
		line := []rune(sc.Text())
		for i := 0; i < len(line); i++ {
			if line[i] == 0x1b && i+1 < len(line) && line[i+1] == '[' {
				j := i + 2
				for j < len(line) && (line[j] < 0x40 || line[j] > 0x7e) {
					j++
				}
				if j < len(line) && line[j] == 'm' {
					p.sgr(string(line[i+2 : j]))
				}
				i = j
				continue
			}
			fg, bg := p.fg, p.bg
			if p.reverse {
				fg, bg = bg, fg
			}
			row = append(row, cell{r: line[i], fg: fg, bg: bg, bold: p.bold})
		}
		rows = append(rows, row)
	}
	return rows, sc.Err()
}

func face(ttf []byte, size float64) (font.Face, error) {
	f, err := opentype.Parse(ttf)
	if err != nil {
		return nil, err
	}
	return opentype.NewFace(f, &opentype.FaceOptions{Size: size, DPI: 72, Hinting: font.HintingFull})
}

func main() {
	out := flag.String("o", "screen.png", "PNG to write")
	cols := flag.Int("cols", 0, "columns (0: the widest line)")
	size := flag.Float64("size", 15, "font size in pixels")
	flag.Parse()
	if err := run(os.Stdin, *out, *cols, *size); err != nil {
		fmt.Fprintln(os.Stderr, "termpng:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out string, cols int, size float64) error {
	rows, err := parse(in)
	if err != nil {
		return fmt.Errorf("reading the screen: %w", err)
	}
	regular, err := face(liberationmonoregular.TTF, size)
	if err != nil {
		return err
	}
	bold, err := face(liberationmonobold.TTF, size)
	if err != nil {
		return err
	}
	adv, _ := regular.GlyphAdvance('M')
	cw := adv.Ceil()
	ch := int(size*1.25 + 0.5)
	ascent := regular.Metrics().Ascent.Ceil()
	for _, r := range rows {
		cols = max(cols, len(r))
	}
	pad := 12
	img := image.NewRGBA(image.Rect(0, 0, cols*cw+2*pad, len(rows)*ch+2*pad))
	draw.Draw(img, img.Bounds(), &image.Uniform{defaultBG}, image.Point{}, draw.Src)
	for y, r := range rows {
		for x, c := range r {
			x0, y0 := pad+x*cw, pad+y*ch
			cellRect := image.Rect(x0, y0, x0+cw, y0+ch)
			draw.Draw(img, cellRect, &image.Uniform{c.bg}, image.Point{}, draw.Src)
			switch {
			case c.r == ' ':
			case c.r >= '▁' && c.r <= '█':
				// Block elements are drawn, not taken from the font, so
				// the graphs fill their cells exactly.
				h := ch * int(c.r-'▁'+1) / 8
				draw.Draw(img, image.Rect(x0, y0+ch-h, x0+cw, y0+ch), &image.Uniform{c.fg}, image.Point{}, draw.Src)
			default:
				f := regular
				if c.bold {
					f = bold
				}
				d := font.Drawer{Dst: img, Src: &image.Uniform{c.fg}, Face: f, Dot: fixed.P(x0, y0+ascent+(ch-int(size))/2-1)}
				d.DrawString(string(c.r))
			}
		}
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
