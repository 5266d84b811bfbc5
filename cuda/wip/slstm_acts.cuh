typedef struct mn__cm_slstm_acts { float* unused; } mn__cm_slstm_acts;
typedef struct mn__cm_slstm_dacts { float* unused; } mn__cm_slstm_dacts;
