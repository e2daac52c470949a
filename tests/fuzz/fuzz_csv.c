/* CSV/TSV expression files, plain or gzip (ast_data_read_csv through
 * ast_data_read), then preprocessing. The first two input bytes choose how
 * the rest is presented (tests/fuzz/README.md):
 *   byte 0, bits 0-1  file name: data.csv, data.tsv, data.txt, data
 *           bit 2     gzip: the target compresses the rest (name + .gz)
 *           bit 3     with bit 2: cut the compressed stream short, keeping
 *                     byte 1 / 256 of it; the read must then fail
 *           bit 4     genes x cells layout: the rest up to the first NUL is
 *                     the matrix, what follows is the coordinate file
 *           bit 5     without bit 2: named .gz, the bytes as they are
 *   byte 1            the cut point (bit 3)
 * A read either fails with a message or gives cells, genes and finite
 * values, and so does preprocessing. */
#include <math.h>
#include <zlib.h>

#include "fuzz_data.h"

static unsigned char *gzip(const uint8_t *data, size_t size, size_t *out_size)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    FUZZ_CHECK(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK, "deflateInit2");
    size_t cap = deflateBound(&z, size) + 32;
    unsigned char *out = malloc(cap);
    z.next_in = (unsigned char *)data;
    z.avail_in = (uInt)size;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    FUZZ_CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END, "deflate");
    *out_size = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    static const char *const names[] = {"data.csv", "data.tsv", "data.txt", "data"};
    unsigned flags = data[0], cut = data[1];
    int gz = flags & 4, truncate = gz && (flags & 8), by_genes = flags & 16, raw_gz = !gz && (flags & 32);
    data += 2, size -= 2;
    char name[64], path[4200], coords[4200];
    snprintf(name, sizeof name, "%s%s", names[flags & 3], gz || raw_gz ? ".gz" : "");
    fuzz_path(name, path, sizeof path);
    fuzz_path("coords.txt", coords, sizeof coords);

    size_t matrix = size;
    ast_data_opts o;
    ast_data_opts_default(&o);
    if (by_genes) {
        o.genes_by_cells = 1;
        const uint8_t *nul = memchr(data, 0, size);
        if (nul) {
            matrix = (size_t)(nul - data);
            fuzz_write(coords, nul + 1, size - matrix - 1);
            o.coords_file = coords;
        }
    }
    int cut_short = 0;
    if (gz) {
        size_t zsize;
        unsigned char *z = gzip(data, matrix, &zsize);
        size_t keep = truncate ? zsize * cut / 256 : zsize;
        cut_short = keep < zsize;
        fuzz_write(path, z, keep);
        free(z);
    } else {
        fuzz_write(path, data, matrix);
    }

    ast_error e = {""};
    ast_dataset d;
    if (ast_data_read(path, &o, &d, &e) != 0) {
        FUZZ_CHECK_ERROR(&e, "ast_data_read");
        return 0;
    }
    FUZZ_CHECK(!cut_short, "a gzip file cut short (%u/256 of it kept) was read without an error: %lld cells", cut,
               (long long)d.n_cells);
    fuzz_check_dataset(&d, "read");
    if (ast_data_preprocess(&d, &o, &e) == 0)
        fuzz_check_dataset(&d, "preprocessed");
    else
        FUZZ_CHECK_ERROR(&e, "ast_data_preprocess");
    ast_dataset_free(&d);
    return 0;
}
