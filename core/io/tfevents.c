/* TensorBoard's event files: the few protobuf fields of Event, Summary and
 * SessionLog that scalars need, encoded by hand (Debian has no C protobuf
 * library worth a dependency for this), framed as TFRecords. Field numbers
 * are those of TensorBoard's event.proto and summary.proto (the part
 * used is in tests/proto/). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/hash.h"
#include "io/tfevents.h"

struct ast_tfevents {
    FILE *f;
    char *path;
};

/* Protobuf's wire types: varint, 64-bit, length-delimited, 32-bit. */
enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_BYTES = 2, WIRE_FIXED32 = 5 };

/* Event's fields, and those of the messages inside it. */
enum { EVENT_WALL_TIME = 1, EVENT_STEP = 2, EVENT_FILE_VERSION = 3, EVENT_SUMMARY = 5, EVENT_SESSION_LOG = 7 };
enum { SUMMARY_VALUE = 1, VALUE_TAG = 1, VALUE_SIMPLE_VALUE = 2, SESSION_LOG_STATUS = 1, SESSION_LOG_START = 1 };

/* A message being encoded: p has room for what the caller sized it for. */
typedef struct pb {
    unsigned char *p;
    size_t n;
} pb;

static void put_varint(pb *b, uint64_t v)
{
    for (; v >= 0x80; v >>= 7) b->p[b->n++] = (unsigned char)(v | 0x80);
    b->p[b->n++] = (unsigned char)v;
}

static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    for (; v >= 0x80; v >>= 7) n++;
    return n;
}

static void put_key(pb *b, int field, int wire) { put_varint(b, (uint64_t)field << 3 | (uint64_t)wire); }

static void put_le(pb *b, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) b->p[b->n++] = (unsigned char)(v >> 8 * i);
}

static void put_double(pb *b, int field, double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    put_key(b, field, WIRE_FIXED64);
    put_le(b, v, 8);
}

static void put_float(pb *b, int field, float x)
{
    uint32_t v;
    memcpy(&v, &x, sizeof v);
    put_key(b, field, WIRE_FIXED32);
    put_le(b, v, 4);
}

/* The key and length of a length-delimited field whose n bytes follow. */
static void put_bytes_head(pb *b, int field, size_t n)
{
    put_key(b, field, WIRE_BYTES);
    put_varint(b, n);
}

static void put_string(pb *b, int field, const char *s)
{
    size_t n = strlen(s);
    put_bytes_head(b, field, n);
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

/* TFRecord's CRC masking, so that a CRC of data holding CRCs stays strong. */
static uint32_t masked_crc(const void *data, size_t n)
{
    uint32_t c = ast_crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static void write_record(ast_tfevents *w, const pb *event)
{
    unsigned char head[12], tail[4];
    pb h = {head, 0}, t = {tail, 0};
    put_le(&h, event->n, 8);
    put_le(&h, masked_crc(head, 8), 4);
    put_le(&t, masked_crc(event->p, event->n), 4);
    fwrite(head, 1, sizeof head, w->f);
    fwrite(event->p, 1, event->n, w->f);
    fwrite(tail, 1, sizeof tail, w->f);
}

/* The fields every Event starts with; step 0, proto3's default, is left
 * out as protobuf's own encoders do. Room: 9 + 11 bytes. */
static void put_event_head(pb *b, double wall_time, int64_t step)
{
    put_double(b, EVENT_WALL_TIME, wall_time);
    if (!step) return;
    put_key(b, EVENT_STEP, WIRE_VARINT);
    put_varint(b, (uint64_t)step);
}

void ast_tfevents_scalar(ast_tfevents *w, double wall_time, int64_t step, const char *tag, float value)
{
    size_t tag_n = strlen(tag);
    size_t value_n = 1 + varint_size(tag_n) + tag_n + 5; /* tag, simple_value */
    size_t summary_n = 1 + varint_size(value_n) + value_n;
    pb b = {ast_xmalloc(20 + 1 + varint_size(summary_n) + summary_n), 0};
    put_event_head(&b, wall_time, step);
    put_bytes_head(&b, EVENT_SUMMARY, summary_n);
    put_bytes_head(&b, SUMMARY_VALUE, value_n);
    put_string(&b, VALUE_TAG, tag);
    put_float(&b, VALUE_SIMPLE_VALUE, value);
    write_record(w, &b);
    free(b.p);
}

ast_tfevents *ast_tfevents_open(const char *dir, double wall_time, int64_t first_step, ast_error *e)
{
    char host[256] = "localhost", path[4400];
    gethostname(host, sizeof host - 1);
    snprintf(path, sizeof path, "%s/events.out.tfevents.%010lld.%s.%ld", dir, (long long)wall_time, host, (long)getpid());
    ast_tfevents *w = ast_xcalloc(1, sizeof *w);
    w->path = ast_xstrdup(path);
    if (!(w->f = fopen(path, "wb"))) {
        ast_error_set(e, "%s: cannot open for writing: %s", path, strerror(errno));
        ast_tfevents_close(w);
        return NULL;
    }
    unsigned char event[64];
    pb b = {event, 0};
    put_event_head(&b, wall_time, 0);
    put_string(&b, EVENT_FILE_VERSION, "brain.Event:2");
    write_record(w, &b);
    b.n = 0;
    put_event_head(&b, wall_time, first_step);
    put_bytes_head(&b, EVENT_SESSION_LOG, 2);
    put_key(&b, SESSION_LOG_STATUS, WIRE_VARINT);
    put_varint(&b, SESSION_LOG_START);
    write_record(w, &b);
    return w;
}

int ast_tfevents_flush(ast_tfevents *w, ast_error *e)
{
    if (fflush(w->f) == 0 && !ferror(w->f)) return 0;
    ast_error_set(e, "%s: cannot write: %s", w->path, strerror(errno));
    return -1;
}

void ast_tfevents_close(ast_tfevents *w)
{
    if (!w) return;
    if (w->f) fclose(w->f);
    free(w->path);
    free(w);
}
