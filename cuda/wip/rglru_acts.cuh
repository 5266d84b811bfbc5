typedef struct mn__cm_rglru_acts { float* unused; } mn__cm_rglru_acts;
typedef struct mn__cm_rglru_dacts { float* unused; } mn__cm_rglru_dacts;
