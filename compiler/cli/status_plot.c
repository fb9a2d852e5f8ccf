/* status_plot.c — `llmc status --plot`: the loss curve as SVG or PNG.
 *
 * Both pictures show the same thing: training loss against optimizer step (a
 * line), held-out losses as points, axes with tick values. The PNG is drawn
 * here (no image library): an RGB raster, a 3x5 digit font for the tick
 * values, stored (uncompressed) deflate blocks, CRC-32 and Adler-32. */
#include "status.h"
#include "arena.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define W 800   /* the picture in px, SVG and PNG alike */
#define H 480
#define ML 70   /* margins: left, right, top, bottom */
#define MR 20
#define MT 40
#define MB 50

/* The data's range on both axes: steps (x) and loss (y). */
typedef struct {
    double x0, x1, y0, y1;
} Box;

/* The data's range (training and held-out points together), non-finite
 * losses left out, widened where it is empty (one step, a flat loss) so the
 * scales never divide by zero, and 5% of headroom above and below. */
static Box bounds(const StatusPoint *t, size_t nt, const StatusPoint *e, size_t ne)
{
    Box b = {INFINITY, -INFINITY, INFINITY, -INFINITY};
    for (size_t i = 0; i < nt + ne; i++) {
        const StatusPoint *p = i < nt ? &t[i] : &e[i - nt];
        if (!isfinite(p->step) || !isfinite(p->loss)) continue;
        if (p->step < b.x0) b.x0 = p->step;
        if (p->step > b.x1) b.x1 = p->step;
        if (p->loss < b.y0) b.y0 = p->loss;
        if (p->loss > b.y1) b.y1 = p->loss;
    }
    if (!(b.x0 <= b.x1)) b = (Box){0, 1, 0, 1};
    if (b.x1 - b.x0 < 1) b.x1 = b.x0 + 1;
    if (b.y1 - b.y0 < 1e-9) { b.y0 -= 0.5; b.y1 += 0.5; }
    double pad = (b.y1 - b.y0) * 0.05;
    b.y0 -= pad;
    b.y1 += pad;
    return b;
}

/* About n "nice" ticks (1, 2, 5 x 10^k) covering [lo, hi]. */
static double tick_step(double lo, double hi, int n)
{
    double raw = (hi - lo) / n, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

/* data -> picture coordinates (y grows downwards in both formats) */
static double px(const Box *b, double x) { return ML + (x - b->x0) / (b->x1 - b->x0) * (W - ML - MR); }
static double py(const Box *b, double y) { return H - MB - (y - b->y0) / (b->y1 - b->y0) * (H - MT - MB); }

/* As many decimals as the tick step needs (0.05: two); a value within a
 * millionth of a step of 0 is printed 0, not -0.00 from rounding. */
static void fmt_tick(char *buf, size_t n, double v, double step)
{
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (dec > 6) dec = 6;
    snprintf(buf, n, "%.*f", dec, fabs(v) < step * 1e-6 ? 0.0 : v);
}

/* The title comes from the plan (job and run names): escaped for XML, and
 * control characters, which XML 1.0 forbids, dropped. */
static void xml_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else if ((unsigned char)*s >= 0x20) fputc(*s, f);
    }
}

/* The SVG: white background, title, grid and tick labels, frame, axis names, the training line, the held-out
 * points and a legend with their counts. Text is real text here, so the title is shown in full. */
static void write_svg(FILE *f, const char *title, const StatusPoint *t, size_t nt, const StatusPoint *e, size_t ne)
{
    Box b = bounds(t, nt, e, ne);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            W, H, W, H);
    fputs("<text x=\"70\" y=\"24\" font-size=\"14\">", f);
    xml_escape(f, title);
    fputs("</text>\n", f);
    double xs = tick_step(b.x0, b.x1, 8), ys = tick_step(b.y0, b.y1, 6);
    char lab[64];
    /* grid lines at the ticks (the 1e-9 keeps a tick that lands on the edge) */
    for (double v = ceil(b.y0 / ys) * ys; v <= b.y1 + ys * 1e-9; v += ys) {
        fmt_tick(lab, sizeof lab, v, ys);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                ML, py(&b, v), W - MR, py(&b, v), ML - 6, py(&b, v) + 4, lab);
    }
    for (double v = ceil(b.x0 / xs) * xs; v <= b.x1 + xs * 1e-9; v += xs) {
        fmt_tick(lab, sizeof lab, v, xs);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>"
                   "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                px(&b, v), MT, px(&b, v), H - MB, px(&b, v), H - MB + 16, lab);
    }
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"black\"/>\n", ML, MT,
            W - ML - MR, H - MT - MB);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">step</text>\n", (ML + W - MR) / 2, H - 12);
    fprintf(f, "<text x=\"16\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 16 %d)\">loss</text>\n",
            (MT + H - MB) / 2, (MT + H - MB) / 2);
    if (nt) {
        /* id and class name the series for readers of the file (tests/status counts class="eval") */
        fputs("<polyline id=\"train\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"", f);
        for (size_t i = 0; i < nt; i++)
            if (isfinite(t[i].loss)) fprintf(f, "%s%.1f,%.1f", i ? " " : "", px(&b, t[i].step), py(&b, t[i].loss));
        fputs("\"/>\n", f);
    }
    for (size_t i = 0; i < ne; i++)
        fprintf(f, "<circle class=\"eval\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#d62728\"/>\n", px(&b, e[i].step),
                py(&b, e[i].loss));
    fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"#1f77b4\" text-anchor=\"end\">train loss (%zu steps)</text>\n",
            W - MR - 4, MT + 16, nt);
    if (ne)
        fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"#d62728\" text-anchor=\"end\">held-out loss (%zu)</text>\n",
                W - MR - 4, MT + 32, ne);
    fputs("</svg>\n", f);
}

/* ---- PNG ------------------------------------------------------------------ */

typedef struct {
    /* 800 x 480 x 3 bytes, about 1.1 MB: allocated, never on the stack */
    uint8_t px[H][W][3];   /* RGB, 8 bits each, rows top to bottom: PNG colour type 2 as is */
} Raster;

/* One pixel, clipped to the picture: callers draw near the edges without checking. */
static void put(Raster *r, int x, int y, const uint8_t c[3])
{
    if (x >= 0 && x < W && y >= 0 && y < H) memcpy(r->px[y][x], c, 3);
}

/* Bresenham's line, each point a thick x thick square. */
static void line(Raster *r, int x0, int y0, int x1, int y1, const uint8_t c[3], int thick)
{
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, e = dx + dy;
    for (;;) {
        for (int a = 0; a < thick; a++)
            for (int b2 = 0; b2 < thick; b2++) put(r, x0 + a, y0 + b2, c);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * e;
        if (e2 >= dy) { e += dy; x0 += sx; }
        if (e2 <= dx) { e += dx; y0 += sy; }
    }
}

/* 3x5 glyphs for 0-9 . - (rows top to bottom, 3 bits each) */
static const uint8_t font[12][5] = {
    {7, 5, 5, 5, 7}, {2, 6, 2, 2, 7}, {7, 1, 7, 4, 7}, {7, 1, 7, 1, 7}, {5, 5, 7, 1, 1}, {7, 4, 7, 1, 7},
    {7, 4, 7, 5, 7}, {7, 1, 1, 1, 1}, {7, 5, 7, 5, 7}, {7, 5, 7, 1, 7}, {0, 0, 0, 0, 2}, {0, 0, 7, 0, 0},
};

/* Text of digits, '.' and '-' at scale 2; anchor: 0 left, 1 centre, 2 right. */
static void text(Raster *r, int x, int y, const char *s, int anchor, const uint8_t c[3])
{
    int w = (int)strlen(s) * 8;
    x -= anchor == 1 ? w / 2 : anchor == 2 ? w : 0;
    for (; *s; s++, x += 8) {
        int g = *s >= '0' && *s <= '9' ? *s - '0' : *s == '.' ? 10 : *s == '-' ? 11 : -1;
        if (g < 0) continue;
        for (int row = 0; row < 5; row++)
            for (int col = 0; col < 3; col++)
                if (font[g][row] >> (2 - col) & 1)
                    for (int a = 0; a < 2; a++)
                        for (int b2 = 0; b2 < 2; b2++) put(r, x + col * 2 + a, y + row * 2 + b2, c);
    }
}

/* CRC-32 (polynomial 0xedb88320, reflected), over each chunk's type and
 * data, as the PNG specification requires. */
static uint32_t crc_table[256];
/* The byte-at-a-time table; built on each PNG written, which costs nothing next to the raster. */
static void crc_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
}
/* CRC C continued over N more bytes (start with 0): the inversions before and after are the specification's. */
static uint32_t crc(uint32_t c, const uint8_t *p, size_t n)
{
    c ^= 0xffffffffu;
    while (n--) c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

/* PNG's integers are big-endian. */
static void be32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = (uint8_t)v; }

/* A PNG chunk: big-endian length, type, data, CRC of type and data. */
static void chunk(FILE *f, const char *type, const uint8_t *data, uint32_t n)
{
    uint8_t hdr[8];
    be32(hdr, n);
    memcpy(hdr + 4, type, 4);
    fwrite(hdr, 1, 8, f);
    if (n) fwrite(data, 1, n, f);
    uint32_t c = crc(crc(0, hdr + 4, 4), data, n);
    uint8_t t[4];
    be32(t, c);
    fwrite(t, 1, 4, f);
}

/* The same picture as write_svg but for the title and the axis names: the built-in font has only digits, '.'
 * and '-', enough for the tick values. */
static void write_png(FILE *f, const StatusPoint *t, size_t nt, const StatusPoint *e, size_t ne)
{
    static const uint8_t white[3] = {255, 255, 255}, black[3] = {0, 0, 0}, grid[3] = {221, 221, 221},
                         blue[3] = {31, 119, 180}, red[3] = {214, 39, 40};
    Raster *r = xmalloc(sizeof *r);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) memcpy(r->px[y][x], white, 3);
    Box b = bounds(t, nt, e, ne);
    double xs = tick_step(b.x0, b.x1, 8), ys = tick_step(b.y0, b.y1, 6);
    char lab[64];
    for (double v = ceil(b.y0 / ys) * ys; v <= b.y1 + ys * 1e-9; v += ys) {
        int y = (int)lround(py(&b, v));
        line(r, ML, y, W - MR, y, grid, 1);
        fmt_tick(lab, sizeof lab, v, ys);
        text(r, ML - 6, y - 5, lab, 2, black);
    }
    for (double v = ceil(b.x0 / xs) * xs; v <= b.x1 + xs * 1e-9; v += xs) {
        int x = (int)lround(px(&b, v));
        line(r, x, MT, x, H - MB, grid, 1);
        fmt_tick(lab, sizeof lab, v, xs);
        text(r, x, H - MB + 8, lab, 1, black);
    }
    line(r, ML, MT, W - MR, MT, black, 1);
    line(r, ML, H - MB, W - MR, H - MB, black, 1);
    line(r, ML, MT, ML, H - MB, black, 1);
    line(r, W - MR, MT, W - MR, H - MB, black, 1);
    int have = 0, lx = 0, ly = 0;
    for (size_t i = 0; i < nt; i++) {
        if (!isfinite(t[i].loss)) continue;
        int x = (int)lround(px(&b, t[i].step)), y = (int)lround(py(&b, t[i].loss));
        if (have) line(r, lx, ly, x, y, blue, 2);
        else put(r, x, y, blue);
        lx = x; ly = y; have = 1;
    }
    for (size_t i = 0; i < ne; i++) {   /* held-out losses: 7x7 red squares */
        int x = (int)lround(px(&b, e[i].step)), y = (int)lround(py(&b, e[i].loss));
        for (int a = -3; a <= 3; a++) line(r, x - 3, y + a, x + 3, y + a, red, 1);
    }
    /* IHDR, then IDAT: zlib stream of stored blocks over the filtered rows (filter 0) */
    crc_init();
    static const uint8_t sig[8] = {137, 'P', 'N', 'G', 13, 10, 26, 10};
    fwrite(sig, 1, 8, f);
    uint8_t ihdr[13];
    be32(ihdr, W);
    be32(ihdr + 4, H);
    /* bit depth 8, colour type 2 (RGB), deflate, adaptive filtering, no interlace */
    ihdr[8] = 8; ihdr[9] = 2; ihdr[10] = 0; ihdr[11] = 0; ihdr[12] = 0;
    chunk(f, "IHDR", ihdr, 13);
    size_t raw_n = (size_t)H * (1 + W * 3);
    uint8_t *raw = xmalloc(raw_n);
    for (int y = 0; y < H; y++) {
        raw[(size_t)y * (1 + W * 3)] = 0;
        memcpy(raw + (size_t)y * (1 + W * 3) + 1, r->px[y], W * 3);
    }
    /* zlib header 0x78 0x01, then stored (uncompressed) deflate blocks of at
     * most 65535 bytes, each with its final bit, LEN and ~LEN, then Adler-32
     * of the raw bytes. The picture is ~1.1 MB; not worth a codec here. */
    size_t nblk = (raw_n + 65534) / 65535;
    size_t z_n = 2 + nblk * 5 + raw_n + 4;
    uint8_t *z = xmalloc(z_n), *q = z;
    /* 0x78: deflate with a 32 KiB window; 0x01 makes the pair a multiple of 31, as zlib's header check wants */
    *q++ = 0x78; *q++ = 0x01;
    uint32_t s1 = 1, s2 = 0;
    for (size_t off = 0; off < raw_n; off += 65535) {
        size_t n = raw_n - off < 65535 ? raw_n - off : 65535;
        *q++ = off + n == raw_n;
        *q++ = (uint8_t)n; *q++ = (uint8_t)(n >> 8);
        *q++ = (uint8_t)~n; *q++ = (uint8_t)(~n >> 8);
        memcpy(q, raw + off, n);
        q += n;
    }
    for (size_t i = 0; i < raw_n; i++) {
        /* 65521: the largest prime below 2^16, Adler-32's modulus */
        s1 = (s1 + raw[i]) % 65521;
        s2 = (s2 + s1) % 65521;
    }
    be32(q, (s2 << 16) | s1);
    chunk(f, "IDAT", z, (uint32_t)z_n);
    chunk(f, "IEND", NULL, 0);
    free(z);
    free(raw);
    free(r);
}

/* Written as PATH.tmp and renamed, so a viewer never reads a half-written picture. */
int status_plot(const char *path, const char *title, const StatusPoint *train, size_t ntrain,
                const StatusPoint *eval, size_t neval, char *err, size_t errlen)
{
    if (ntrain == 0 && neval == 0) {
        snprintf(err, errlen, "%s: nothing to plot yet (no steps in the metrics)", path);
        return -1;
    }
    size_t n = strlen(path);
    bool png = n >= 4 && strcmp(path + n - 4, ".png") == 0;   /* else SVG */
    char *tmp = xmalloc(n + 16);
    snprintf(tmp, n + 16, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    if (png) write_png(f, train, ntrain, eval, neval);
    else write_svg(f, title, train, ntrain, eval, neval);
    /* '|', not '||': fclose runs even after a write error */
    if (ferror(f) | fclose(f) || rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}
