typedef struct mn__cm_mlstm_acts { float* unused; } mn__cm_mlstm_acts;
typedef struct mn__cm_mlstm_dacts { float* unused; } mn__cm_mlstm_dacts;
