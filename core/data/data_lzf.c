/* The LZF compression filter (HDF5 filter 32000) that h5py registers
 * for compression='lzf', so that such .h5ad files read: libhdf5 does not
 * ship it, and Debian's hdf5-plugin-lzf does not load. Decompression
 * only; alphast never writes LZF. The data layout is h5py's
 * lzf_filter.c: each chunk is one lzf_compress block, and the filter's
 * third parameter is the chunk's size uncompressed. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#ifdef HAVE_LIBLZF_LZF_H
#include <liblzf/lzf.h>
#else
#include <lzf.h>
#endif

#include "data/data_h5ad.h"

#define LZF_FILTER 32000
/* HDF5 chunks are below 4 GiB: a larger size is damage, not data. */
#define MAX_CHUNK ((size_t)UINT32_MAX)

static size_t lzf_filter(unsigned flags, size_t n_params, const unsigned params[], size_t nbytes, size_t *buf_size,
                         void **buf)
{
    if (!(flags & H5Z_FLAG_REVERSE)) return 0; /* compressing: not offered */
    size_t size = n_params >= 3 && params[2] ? params[2] : *buf_size;
    for (;;) {
        void *out = malloc(size);
        unsigned n = out ? lzf_decompress(*buf, (unsigned)nbytes, out, (unsigned)size) : 0;
        if (n) {
            free(*buf);
            *buf = out, *buf_size = size;
            return n;
        }
        free(out);
        /* Too small a guess (no size parameter): grow; anything else is damage. */
        if (errno != E2BIG || size >= MAX_CHUNK / 2) return 0;
        size *= 2;
    }
}

/* Registered before any file is opened, so that libhdf5 never looks for
 * a plugin of this id (asking H5Zfilter_avail would load one). */
void ast_data_register_lzf(void)
{
    static const H5Z_class2_t lzf = {H5Z_CLASS_T_VERS, LZF_FILTER, 0, 1, "lzf", NULL, NULL, lzf_filter};
    static int registered;
    if (!registered) registered = H5Zregister(&lzf) >= 0;
}
