#define MN__CM_ROWS_RGLRU
