/* TEMPORARY while the op set lands: ops not implemented yet abort loudly.
 * Each block is deleted by the change that implements it; this file goes
 * away with the last block. */
#include "alphast/core.h"


/* keep this line between the blocks so their deletions merge cleanly */
