#include <mxfp8/mxfp8.h>
