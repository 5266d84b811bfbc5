#define MN__CM_ROWS_SLSTM
